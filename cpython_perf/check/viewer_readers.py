"""The viewer files (cpython_perf.record.viewer_files) read back by the programs people open them with.

- pprof: Go's own `go tool pprof -traces` (Debian: golang-go), every sample's stack, leaf first;
- Firefox Profiler: `profiler-cli` (@firefox-devtools/profiler-cli, the Firefox Profiler's importers and call
  trees run in Node), its top-down call tree as JSON;
- speedscope: speedscope's own web app (the `speedscope` npm package) in headless Chromium, the page's
  title and profile list read from the DOM, and a screenshot.

The npm packages are pinned by viewers/package-lock.json (integrity hashes, the configured registry) and
installed once into ~/.cache/cpython-perf/tools/viewers-<hash of the lock>/.  A reader that cannot be had
here raises ReaderMissing with what to install.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..source import sources

PACKAGE_DIR = Path(__file__).parent / "viewers"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class ReaderMissing(RuntimeError):
    """A reader this machine does not have, with what would give it."""


class ReaderFailed(RuntimeError):
    """A reader that ran and refused the file, with what it said."""


def _run(argv: list[str], timeout: float = 120, env: dict | None = None, cwd: Path | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if done.returncode != 0:
        raise ReaderFailed(f"{' '.join(argv[:3])} ... exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-800:]}")
    return done.stdout


# --- pprof ---

def go_pprof() -> list[str]:
    """The command of Go's pprof."""
    if shutil.which("go"):
        return ["go", "tool", "pprof"]
    if shutil.which("pprof"):
        return ["pprof"]
    raise ReaderMissing("no Go pprof here (Debian: apt-get install golang-go, which has `go tool pprof`)")


def pprof_traces(path: Path) -> list[dict]:
    """Every sample of a pprof file as pprof prints it: {'count', 'labels', 'stack' (function names, leaf
    first)}."""
    text = _run(go_pprof() + ["-traces", str(path)], env={**os.environ, "PPROF_TMPDIR": tempfile.gettempdir()})
    traces, current = [], None
    for line in text.splitlines():
        if line.startswith("-----------+"):
            current = {"count": 0, "labels": {}, "stack": []}
            traces.append(current)
            continue
        if current is None or not line.strip():
            continue
        head, _, rest = line.partition(" ")
        stripped = line.strip()
        if ":  " in stripped and not current["stack"] and stripped.split(":", 1)[0].isidentifier():
            key, _, value = stripped.partition(":")
            current["labels"][key] = value.strip()
        elif not current["stack"]:
            count, _, function = stripped.partition(" ")
            current["count"] = int(count) if count.isdigit() else 0
            current["stack"].append(function.strip())
        else:
            current["stack"].append(stripped)
    return [t for t in traces if t["stack"]]


def pprof_locations(path: Path) -> list[dict]:
    """pprof's own listing of the file's locations (-raw): {'function', 'file', 'mapping'} each."""
    text = _run(go_pprof() + ["-raw", str(path)], env={**os.environ, "PPROF_TMPDIR": tempfile.gettempdir()})
    section, mappings, locations = None, {}, []
    for line in text.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Locations" and line[:6].strip().rstrip(":").isdigit():
            fields = line.split()
            mapping = next((f[2:] for f in fields if f.startswith("M=")), None)
            rest = [f for f in fields[2:] if not f.startswith("M=")]
            function, where = rest[0], rest[1] if len(rest) > 1 else ""
            locations.append({"function": function, "file": where.rsplit(":", 1)[0], "mapping": mapping})
        elif section == "Mappings" and ":" in line:
            number, _, rest = line.partition(":")
            fields = rest.split()
            if number.strip().isdigit() and len(fields) >= 2:
                mappings[number.strip()] = fields[1]
    for loc in locations:
        loc["mapping"] = mappings.get(loc["mapping"]) if loc["mapping"] else None
    return locations


# --- npm readers ---

def npm_readers(cache_dir: Path | None = None) -> Path:
    """node_modules of the pinned readers, installed once (npm ci into a staging directory, then renamed)."""
    if not shutil.which("npm") or not shutil.which("node"):
        raise ReaderMissing("no Node.js and npm here (Debian: apt-get install nodejs npm)")
    lock = (PACKAGE_DIR / "package-lock.json").read_bytes()
    digest = hashlib.sha256((PACKAGE_DIR / "package.json").read_bytes() + b"\0" + lock).hexdigest()[:12]
    root = (cache_dir or sources.default_cache_dir().parent / "tools") / f"viewers-{digest}"
    if (root / "node_modules" / ".package-lock.json").is_file():
        return root / "node_modules"
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".viewers-", dir=root.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(PACKAGE_DIR / name, staging / name)
        try:
            _run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], timeout=600, cwd=staging)
        except ReaderFailed as exc:
            raise ReaderMissing(f"the viewers' npm packages could not be installed ({exc})") from None
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root / "node_modules"


def _call_paths(node: dict, prefix: tuple = ()) -> list[tuple[tuple[str, ...], int]]:
    """Root-first paths of a profiler-cli call tree, each with its self samples."""
    out = []
    if node.get("childrenTruncated"):
        raise ReaderFailed(f"profiler-cli left out children of {node.get('nameWithLibrary')} (--max-lines)")
    for child in node.get("children", []):
        path = prefix + (child["nameWithLibrary"],)
        if child.get("selfSamples"):
            out.append((path, child["selfSamples"]))
        out += _call_paths(child, path)
    return out


def firefox_threads(path: Path, node_modules: Path) -> dict[str, dict]:
    """Each thread of a profile as the Firefox Profiler reads it: {thread name: {'paths': [(root-first
    `lib!function` names, self samples)], 'categories': {category: samples}}}."""
    cli = [shutil.which("node") or "node", str(node_modules / "@firefox-devtools" / "profiler-cli" / "dist"
                                               / "profiler-cli.js")]
    with tempfile.TemporaryDirectory(prefix="profiler-cli-") as sessions:
        env = {**os.environ, "PROFILER_CLI_SESSION_DIR": sessions, "PROFILER_CLI_NO_SYMBOLICATE": "1"}
        try:
            for attempt in range(5):   # its daemon may take longer to start than the client waits
                try:
                    _run(cli + ["load", str(path)], env=env)
                    break
                except ReaderFailed:
                    if attempt == 4:
                        raise
                    time.sleep(1)
            listing = json.loads(_run(cli + ["thread", "list", "--json"], env=env))
            threads = {}
            for thread in listing.get("threads", []):
                handle = thread["threadHandle"] if "threadHandle" in thread else thread["handle"]
                tree = json.loads(_run(cli + ["thread", "samples-top-down", "--json", "--include-idle", "--max-lines", "1000000", "--thread", handle], env=env))
                summary = json.loads(_run(cli + ["thread", "samples", "--json", "--thread", handle], env=env))
                threads[thread.get("name") or tree["friendlyThreadName"]] = {
                    "paths": _call_paths(tree["regularCallTree"]),
                    "categories": {c["name"]: c["samples"] for c in summary["categoryBreakdown"]["categories"]},
                }
            return threads
        finally:
            subprocess.run(cli + ["stop", "--all"], env=env, capture_output=True, timeout=60)


def mojo2austin(cache_dir: Path | None = None) -> Path:
    """austin-python's mojo2austin (viewers/austin-python.txt, hash-checked), in a venv of its own made once
    (where it is made its scripts name it, so it is made in place, and counts once its marker is written last)."""
    requirements = (PACKAGE_DIR / "austin-python.txt").read_bytes()
    root = (cache_dir or sources.default_cache_dir().parent / "tools") / \
        f"austin-python-{hashlib.sha256(requirements).hexdigest()[:12]}"
    done = root / ".installed"
    if done.is_file():
        return root / "bin" / "mojo2austin"
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        _run([sys.executable, "-m", "venv", str(root)], timeout=300)
        _run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--require-hashes", "--no-deps",
              "-r", str(PACKAGE_DIR / "austin-python.txt")], timeout=600)
    except ReaderFailed as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise ReaderMissing(f"austin-python could not be installed ({exc})") from None
    done.write_text("")
    return root / "bin" / "mojo2austin"


def austin_text(mojo: Path, output: Path) -> str:
    """Austin's collapsed text of a MOJO file, by austin-python's own converter."""
    _run([str(mojo2austin()), str(mojo), str(output)], timeout=300)
    return output.read_text(errors="replace")


def browser() -> str:
    found = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if not found:
        raise ReaderMissing(f"no headless browser here (none of {', '.join(BROWSERS)}; Debian: apt-get install "
                            "chromium)")
    return found


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def speedscope_page(path: Path, node_modules: Path, screenshot: Path | None = None) -> str:
    """The DOM of speedscope's page after it loaded path (served with the app from loopback); a PNG of the
    page into screenshot when given."""
    app = node_modules / "speedscope" / "dist" / "release"
    chromium = browser()
    with tempfile.TemporaryDirectory(prefix="speedscope-") as root:
        shutil.copytree(app, Path(root) / "app")
        shutil.copy(path, Path(root) / "app" / "profile.json")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                 functools.partial(_QuietHandler, directory=str(Path(root) / "app")))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            base = f"http://127.0.0.1:{server.server_address[1]}"
            url = f"{base}/index.html#profileURL={base}/profile.json"
            flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={root}/browser",
                     "--virtual-time-budget=8000", "--window-size=1200,700"]
            dom = _run([chromium, *flags, "--dump-dom", url], timeout=180)
            if screenshot is not None:
                _run([chromium, *flags, f"--screenshot={screenshot}", url], timeout=180)
            return dom
        finally:
            server.shutdown()
            server.server_close()
