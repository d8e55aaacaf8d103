"""A profile run's requirements (--requirements FILE), and pip in the container with the host's settings.

The images have no pip, but CPython's bundled ensurepip makes one in a venv (checked: 3.9.2, 3.11.2 and
3.13.5 cells).  The venv is made once per (image id, python, requirements file contents) in a derived image,
`cpython-perf-profile:<target>-<hash>` (ensure_requirements_image): a container of the image makes the venv
at /opt/cpython-perf-venv and `pip install -r`s the file; the venv is copied out (a tar) and `docker build`
adds it to the image (FROM its id, one ADD), tagged only when that succeeded, with nothing else of the
install container (no mount point, no pip setting).  pip in the container reaches the package index the
host's pip is configured for (host_pip_settings, pip_passthrough: PIP_* settings of the environment and of
pip's configuration files, their CA bundle and local index directories mounted read-only; proxy variables).
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DriverError
from .session import Session
from .steps import Step
from .target import ProfileFailed, Target, image_id

PROFILE_REPOSITORY = "cpython-perf-profile"
VENV = "/opt/cpython-perf-venv"
VENV_TAR = "cpython-perf-venv.tar"
REQUIREMENTS_DIR = "/requirements"
PIP_CERT_IN_CONTAINER = "/run/cpython-perf/pip-cert.pem"

PIP_CONFIG_KEYS = {   # pip option -> how its value is treated
    "index-url": "urls", "extra-index-url": "urls", "find-links": "urls", "trusted-host": "plain",
    "cert": "file", "client-cert": "file", "constraint": "files", "timeout": "plain", "default-timeout": "plain",
    "retries": "plain", "proxy": "plain", "no-index": "plain", "disable-pip-version-check": "plain",
    "only-binary": "plain", "prefer-binary": "plain", "pre": "plain",
}
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
# Directories never mounted over in the container (a local index would hide the image's own files)
_PROTECTED = ("/", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/etc", "/opt", "/opt/cpython", "/src", "/out", "/tmp",
              "/run", "/proc", "/sys", "/dev", "/var", "/root", "/home", REQUIREMENTS_DIR, VENV)


def pip_config_files(environ, home: Path) -> list[Path]:
    """pip's configuration files in its order of precedence, lowest first (site files are venv-local and
    left out): global (XDG_CONFIG_DIRS, /etc), user (~/.pip, ~/.config), then $PIP_CONFIG_FILE."""
    xdg_dirs = [d for d in environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d]
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs)] + [Path("/etc/pip.conf")]
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files += [home / ".pip" / "pip.conf", config_home / "pip" / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE") and environ["PIP_CONFIG_FILE"] != os.devnull:
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def host_pip_settings(environ=None, files: list[Path] | None = None, home: Path | None = None) -> dict[str, str]:
    """The pip settings of this host that matter for installing: [global] and [install] of the config
    files, overridden by PIP_<OPTION> environment variables, as pip itself layers them."""
    environ = os.environ if environ is None else environ
    files = pip_config_files(environ, home or Path.home()) if files is None else files
    settings: dict[str, str] = {}
    for path in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path)
        except (OSError, configparser.Error):
            continue
        for section in ("global", "install"):
            if parser.has_section(section):
                for key, value in parser.items(section):
                    if key in PIP_CONFIG_KEYS:
                        settings[key] = " ".join(value.split())
    for key in PIP_CONFIG_KEYS:
        value = environ.get("PIP_" + key.upper().replace("-", "_"))
        if value is not None:
            settings[key] = value
    return settings


@dataclass
class PipPassthrough:
    env: dict[str, str] = field(default_factory=dict)
    mounts: dict[Path, str] = field(default_factory=dict)   # host path -> container path, read-only
    notes: list[str] = field(default_factory=list)          # what was left out, and why


def _mountable(path: Path) -> str | None:
    """Why a host path cannot be mounted at the same place in the container (None: it can)."""
    if not path.exists():
        return "does not exist on this host"
    for protected in _PROTECTED:
        if str(path) == protected or (path.is_dir() and Path(protected).is_relative_to(path)):
            return f"mounting it would hide the image's {protected}"
    return None


def pip_passthrough(settings: dict[str, str], environ=None) -> PipPassthrough:
    """PIP_* variables and read-only mounts that give pip in a container this host's pip configuration.

    Network URLs go as they are; a CA bundle (cert) is mounted at a fixed path; local index and
    find-links directories and constraint files are mounted at their own paths (a file:// simple index
    links to its files by relative URLs, so the index's parent directory is mounted); proxy variables are
    passed on.  A local path that does not exist, or that would hide the image's own directories, is left
    out with a note."""
    environ = os.environ if environ is None else environ
    out = PipPassthrough()

    def mount(path: Path, what: str) -> bool:
        why = _mountable(path)
        if why:
            out.notes.append(f"pip {what} {path} not passed to the container: it {why}")
            return False
        out.mounts[path] = str(path)
        return True

    for key, value in settings.items():
        kind = PIP_CONFIG_KEYS[key]
        var = "PIP_" + key.upper().replace("-", "_")
        if kind == "plain":
            out.env[var] = value
        elif kind == "file":
            if mount(Path(value), key) and key == "cert":
                del out.mounts[Path(value)]
                out.mounts[Path(value)] = PIP_CERT_IN_CONTAINER
                out.env[var] = PIP_CERT_IN_CONTAINER
            elif Path(value) in out.mounts:
                out.env[var] = value
        elif kind == "files":
            kept = [v for v in value.split() if mount(Path(v), key)]
            if kept:
                out.env[var] = " ".join(kept)
        else:   # urls: index-url, extra-index-url, find-links
            kept = []
            for url in value.split():
                if url.startswith("file://") or not re.match(r"^[a-z][a-z0-9+.-]*://", url):
                    path = Path(url[len("file://"):] if url.startswith("file://") else url)
                    root = path.parent if key.endswith("index-url") and path.name == "simple" else path
                    if not mount(root, key):
                        continue
                kept.append(url)
            if kept:
                out.env[var] = " ".join(kept)
    for var in PROXY_VARIABLES:
        if environ.get(var):
            out.env[var] = environ[var]
    return out


def requirements_tag(target_label: str, image_id: str, python: str, requirements: bytes) -> str:
    """cpython-perf-profile:<target>-<12 hex of sha256(image id, python, requirements)>."""
    digest = hashlib.sha256(b"\0".join([image_id.encode(), python.encode(), requirements])).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9._-]+", "-", target_label.lower()).strip("-.")[:100] or "image"
    return f"{PROFILE_REPOSITORY}:{name}-{digest}"


def venv_steps(python: str, requirements_name: str) -> list[Step]:
    make = [python, "-m", "venv", VENV]
    install = [f"{VENV}/bin/python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
               "-r", f"{REQUIREMENTS_DIR}/{requirements_name}"]
    return [Step("venv", shlex.join(make), make), Step("pip", shlex.join(install), install, stream=True)]


def pip_failure_hint(output: str) -> str:
    """What a failed pip install's output says of the index: unreachable, or a requirement not found."""
    unreachable = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
                   "Network is unreachable", "SSLError", "CERTIFICATE_VERIFY_FAILED", "ProxyError",
                   "Connection refused", "timed out")
    if any(s in output for s in unreachable):
        return ("the package index could not be reached from the container (pip uses the host's pip settings: "
                "PIP_INDEX_URL, PIP_CERT, pip.conf; check them with `pip config list`)")
    if "No matching distribution found" in output or "Could not find a version" in output:
        return "a requirement is not on the configured package index"
    return ""


def ensure_requirements_image(client, target: Target, requirements: Path, reinstall: bool, log,
                              record: list[str], passthrough: PipPassthrough | None = None) -> tuple[str, str]:
    """(image, python) with the requirements installed in a venv: the derived image, made if missing."""
    requirements = requirements.resolve()
    if not requirements.is_file():
        raise DriverError(f"--requirements {requirements}: no such file")
    base_id = image_id(client, target.image)
    tag = requirements_tag(target.label, base_id, target.python, requirements.read_bytes())
    python = f"{VENV}/bin/python"
    if not reinstall and image_id(client, tag):
        log(f"requirements: {tag} (cached: {target.image} + {requirements.name})")
        return tag, python
    passthrough = passthrough or pip_passthrough(host_pip_settings())
    for note in passthrough.notes:
        log(f"note: {note}")
    log(f"requirements: making {tag}: a venv at {VENV} in {target.image} with {requirements.name} installed")
    mounts = {requirements.parent: (REQUIREMENTS_DIR, "ro"),
              **{h: (c, "ro") for h, c in passthrough.mounts.items()}}
    session = Session(client, target.image, mounts, [], passthrough.env, REQUIREMENTS_DIR, log, record)
    try:
        for step in venv_steps(target.python, requirements.name):
            code, tail, seconds = session.exec(step)
            if code != 0:
                hint = pip_failure_hint(tail)
                said = [l for l in tail.strip().splitlines() if l.strip()][-3:]
                raise ProfileFailed(f"{step.name} failed in {target.image} (exit {code}): {' / '.join(said)}"
                                    + (f"; {hint}" if hint else ""))
        venv_tar = b"".join(session.container.get_archive(VENV)[0])
    finally:
        session.close()
    build_requirements_image(client, base_id, tag, venv_tar, requirements.name, log, record)
    return tag, python


def requirements_dockerfile(base_id: str, requirements_name: str) -> str:
    """The derived image: the cell's image and the venv made in it, nothing else (no mount point, no pip
    setting of the install container)."""
    return (f"FROM {base_id}\n"
            f"ADD {VENV_TAR} {Path(VENV).parent}/\n"
            f"LABEL cpython-perf.profile.base={json.dumps(base_id)} "
            f"cpython-perf.profile.requirements={json.dumps(requirements_name)}\n")


def build_requirements_image(client, base_id: str, tag: str, venv_tar: bytes, requirements_name: str, log,
                             record: list[str]) -> None:
    """docker build of the derived image from the venv's tar (tagged only when the build succeeds)."""
    import tempfile

    from ..image.docker_build import docker_build

    with tempfile.TemporaryDirectory(prefix="cpython-perf-profile-") as ctx:
        Path(ctx, "Dockerfile").write_text(requirements_dockerfile(base_id, requirements_name))
        Path(ctx, VENV_TAR).write_bytes(venv_tar)
        line = f"$ docker build -t {tag} <context: Dockerfile (FROM the image, ADD {VENV_TAR}), {VENV_TAR} " \
               f"({len(venv_tar) // 1024} KiB, {VENV} copied out of the install container)>"
        log(line)
        record.append(line)
        try:
            docker_build(client, Path(ctx), tag, lambda _line: None)
        except DriverError as exc:
            raise ProfileFailed(str(exc)) from None


def image_path_variable(client, image: str) -> str:
    """The PATH an image's containers get (its config's Env), for a venv's bin to go in front of."""
    for item in client.images.get(image).attrs.get("Config", {}).get("Env") or []:
        if item.startswith("PATH="):
            return item[len("PATH="):]
    return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
