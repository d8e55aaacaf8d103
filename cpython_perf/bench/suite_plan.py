"""The standard suite's benchmarks and the plan of a run.

A benchmark is in the suite if pyperformance's MANIFEST lists it, its pyproject.toml (and the variant's .toml)
lists no dependency beyond pyperf, its directory has no requirements.txt naming anything else, its
requires-python admits the cell's version, and suite.yaml does not exclude it (select).  A run measures the
benchmarks every cell of its plan runs (benchmarks_of_every_cell); on the cells' existing images, a comparison
needing a cell without one is not run, and said so (comparisons_with_images).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import DriverError
from ..image.docker_build import image_exists
from ..matrix import Cell
from .common import Comparison
from .suite_containers import CONTAINER_SUITE


@dataclass(frozen=True)
class Benchmark:
    name: str
    directory: str                     # bm_<base>
    requires_python: str | None
    dependencies: tuple[str, ...]      # of pyproject.toml ([project] dependencies)
    requirements: tuple[str, ...]      # of requirements.txt, where the directory has one
    extra_opts: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def script(self) -> str:
        return f"{CONTAINER_SUITE}/{self.directory}/run_benchmark.py"


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10: the same parser as a package
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DriverError(f"{path}: cannot read the benchmark's metadata: {exc}") from None


def _requirement_name(line: str) -> str:
    return re.split(r"[\s<>=!~;\[]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


def read_manifest(benchmarks: Path) -> list[Benchmark]:
    """Every benchmark of pyperformance's MANIFEST ([benchmarks] section), with its metadata."""
    manifest = Path(benchmarks) / "MANIFEST"
    try:
        text = manifest.read_text()
    except OSError as exc:
        raise DriverError(f"{manifest}: cannot read pyperformance's benchmark list: {exc.strerror}") from None
    found, section = [], None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            section = line
            continue
        if section != "[benchmarks]" or line.startswith("name\t") or line.split()[0] == "name":
            continue
        name, metafile = line.split()[:2]
        if not metafile.startswith("<local"):
            raise DriverError(f"{manifest}: {name}: metafile {metafile} is not local to the release")
        base = metafile[len("<local:"):-1] if metafile.startswith("<local:") else name
        directory = Path(benchmarks) / f"bm_{base}"
        project = _toml(directory / "pyproject.toml")
        meta = dict(project.get("tool", {}).get("pyperformance", {}))
        proj = dict(project.get("project", {}))
        if base != name:
            variant = _toml(directory / f"bm_{name}.toml")
            proj.update(variant.get("project", {}))
            meta.update(variant.get("tool", {}).get("pyperformance", {}))
        requirements_file = directory / "requirements.txt"
        requirements = tuple(r.strip() for r in requirements_file.read_text().splitlines()
                             if r.strip() and not r.strip().startswith("#")) if requirements_file.exists() else ()
        tags = meta.get("tags", ())
        found.append(Benchmark(name, directory.name, proj.get("requires-python"), tuple(proj.get("dependencies", ())),
                               requirements, tuple(meta.get("extra_opts", ())),
                               tuple(tags.split() if isinstance(tags, str) else tags)))
    if not found:
        raise DriverError(f"{manifest}: no benchmark listed")
    return found


def stdlib_only(benchmark: Benchmark) -> bool:
    """Nothing needed beyond the standard library and pyperf: pyproject.toml's dependencies and the
    requirements.txt pyperformance installs from name pyperf only."""
    return all(_requirement_name(r) == "pyperf" for r in (*benchmark.dependencies, *benchmark.requirements))


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def python_admits(requires: str | None, version: str) -> bool:
    """Whether a requires-python of the forms pyperformance uses (">=3.8", ">=3.8, <3.14") admits X.Y."""
    if not requires:
        return True
    have = _version_tuple(version)
    for clause in requires.split(","):
        m = re.fullmatch(r"\s*(>=|<=|==|!=|<|>)\s*(\d+(?:\.\d+)*)\s*", clause)
        if not m:
            raise DriverError(f"requires-python {requires!r}: clause {clause!r} not understood")
        op, want = m.group(1), _version_tuple(m.group(2))
        n = len(want)
        mine = have[:n] + (0,) * (n - len(have[:n]))
        if not {">=": mine >= want, "<=": mine <= want, "==": mine == want, "!=": mine != want,
                "<": mine < want, ">": mine > want}[op]:
            return False
    return True


def select(benchmarks: list[Benchmark], version: str, exclude: dict[str, str],
           only: list[str] | None = None) -> tuple[list[Benchmark], dict[str, str]]:
    """(the stdlib-only benchmarks that run on Python `version`, {left-out name: reason}); `only` narrows the
    selection to those names (an unknown name is an error)."""
    names = {b.name for b in benchmarks}
    unknown = [n for n in (only or []) if n not in names]
    if unknown:
        raise DriverError(f"unknown benchmark(s) {', '.join(unknown)}; the suite has {', '.join(sorted(names))}")
    chosen, left_out = [], {}
    for b in benchmarks:
        if only is not None and b.name not in only:
            continue
        if not stdlib_only(b):
            extra = sorted({_requirement_name(r) for r in (*b.dependencies, *b.requirements)} - {"pyperf"})
            left_out[b.name] = f"needs {', '.join(extra)}"
        elif not python_admits(b.requires_python, version):
            left_out[b.name] = f"requires-python {b.requires_python}"
        elif b.name in exclude:
            left_out[b.name] = exclude[b.name]
        else:
            chosen.append(b)
    return chosen, left_out


def benchmarks_of_every_cell(manifest: list[Benchmark], selection: dict[str, tuple[list[Benchmark], dict]],
                             cells: list[Cell]) -> list[str]:
    """The names of the benchmarks selected for every cell (selection: cell name -> select's answer), in the
    MANIFEST's order."""
    return [b.name for b in manifest if all(b.name in [x.name for x in selection[c.name][0]] for c in cells)]


def comparisons_with_images(client, plan: list[Comparison], log=print) -> tuple[list[Comparison], list[dict]]:
    """(the comparisons whose cells both have an image on this host, the others as not run with the reason)."""
    not_run = []
    missing = {c.cell.name for comparison in plan for c in (comparison.a, comparison.b)
               if not image_exists(client, c.cell.image)}
    for comparison in plan:
        lacking = sorted({comparison.a.cell.name, comparison.b.cell.name} & missing)
        if lacking:
            not_run.append({"kind": comparison.kind, "a": comparison.a.key, "b": comparison.b.key,
                            "reason": f"no image of {', '.join(lacking)} on the measuring host (not built)"})
            log(f"not run: {comparison.b.key} vs {comparison.a.key}: {not_run[-1]['reason']}")
    return [c for c in plan if not ({c.a.cell.name, c.b.cell.name} & missing)], not_run
