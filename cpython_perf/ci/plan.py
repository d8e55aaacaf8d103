"""The plan of a CI run: which images to build and which cells to check, derived from matrix.yaml.

`python -m cpython_perf plan [--event E] [--labels L1,L2] [--select S1,S2] [--aarch64 native|qemu]`
prints one JSON object:

  images  one job per image the run needs, each built once: a base per arch (`base-<arch>`), the tools
          image (`tools`: samply and the flame-graph renderer) and a cell image per cell whose image a
          selected cell needs (`cell-<name>`: its own, its vanilla twin's, a cross build's build Python).
          Content-addressed: `digest` is the inputs digest the driver labels the image with
          (pipeline.cell_inputs, computed here without fetching the source: the tarball enters it by its
          pinned sha256), the tools image's tag digest, or for a base the package-list hash of its tag
          plus the template of its registry build.  `registry_tag` is where the workflow publishes it in
          its registry (a cell: cpython_perf.image.registry's `cpython-perf:<cell>-<inputs digest>`, as `build
          --registry` looks it up): an image published there is not rebuilt.  `artifact`
          (image-<name>-<digest>) is the `docker save | zstd` file a job uploads where it built an image it
          did not publish (a pull request).
  cells   one job per selected cell: the runner it needs, whether its code runs there natively or under
          qemu, where its perf recordings run, the images it loads and its nox session conformance-<cell>.
  report  the job that merges every results-<cell> artifact and runs `nox -s report`.

Timeouts: every image and cell job carries `timeout_minutes` (IMAGE_TIMEOUTS, CELL_TIMEOUTS: the
measured time of its kind with the margin stated there).

Change detection: with `--changed-files FILE` (the paths a pull request or push changes, one a line; the
workflow writes it from git) a change of documentation only (DOCUMENTATION: docs/, any *.md) selects no
cell for the event; labels and `--select` still do.  Without the file (a schedule, a manual run, a diff
that could not be had) nothing is left out.

Selection: a pull request gets matrix.yaml's smoke_cells; its labels add more (`cell:<name>`,
`arch:<arch>`, `all`; other labels are not ours and are ignored); a push, the schedule and a manual
dispatch get every cell.  `--select` (same selectors) replaces the event's own choice.  A selector naming
an unknown cell or arch is an error (exit 2).  GitHub runs at most 256 jobs per matrix: each group is
split into shards of at most 256 (`<group>_<i>`), one job of .github/workflows/matrix.yml per shard.
No Docker and no network here: the plan job runs on a bare runner.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..image import pipeline, registry, render, tools
from ..source import sources
from ..errors import DriverError, UnknownCell
from ..arches import ARCH_FACTS, DEFAULT_ARCH, HOST_NATIVE_ARCHES
from ..matrix import Cell, Matrix

EVENTS = ("pull_request", "push", "schedule", "workflow_dispatch")

# GitHub-hosted runner label -> (its machine, the arches whose code it runs without emulation: the x86_64
# kernel runs i386 code itself), from matrix.yaml's arch_facts (github_runner, runs_on)
RUNNERS = {facts.github_runner: (host, HOST_NATIVE_ARCHES[host])
           for host, facts in ARCH_FACTS.items() if host in HOST_NATIVE_ARCHES}
# arch -> the runner of the host arch that runs its code natively
NATIVE_RUNNER = {arch: ARCH_FACTS[host].github_runner
                 for host, arches in HOST_NATIVE_ARCHES.items() for arch in arches}
X86_RUNNER = ARCH_FACTS[DEFAULT_ARCH].github_runner
ARM_RUNNER = ARCH_FACTS["aarch64"].github_runner
# Where aarch64 cells run: on GitHub's arm64 runners (built there natively, recorded with perf in Docker on
# real arm64 hardware: the driver sees an aarch64 host), or emulated on an x86_64 runner (cross-compiled
# there, qemu-user for the image's programs, perf in a qemu-system guest), for accounts without arm64 runners.
AARCH64_PLACEMENTS = ("native", "qemu")
# The workflow passes the repository variable of that name as $CPYTHON_PERF_DEBIAN_ARCHIVE to the plan and
# to the image jobs alike, so they agree on the tools image's digest.
WORKFLOW_ARCHIVE_VALUE = "${{ vars.CPYTHON_PERF_DEBIAN_ARCHIVE }}"

MAX_MATRIX_JOBS = 256   # GitHub: one job matrix generates at most 256 jobs in a workflow run
# Shard jobs .github/workflows/matrix.yml declares per group: its job `<group>-<i>` (with - for _) takes
# its matrix from the plan job's output `<group>_<i>`.
SHARDS = {"bases": 1, "images": 2, "cross_images": 2, "cells": 2}
GROUPS = tuple(SHARDS)


# Job time limits in minutes (GitHub's default is 360).  Measured on 2 shared cores: a cold cell build
# 161-176 s (3.13-fp, 3.11-fp; results/bench/build-*.json), the free-threaded ft/ftasan ones 137-291 s,
# 3.11-distro 21 min and 3.13-distro 37.5 min (PGO + LTO, docs/matrix.md); a cell's conformance session
# 2-8 min.  A limit is about 3x the slowest build or run of its kind plus 10 min of set-up (apt, image
# download and load, docker save | zstd, upload), so a hung job stops early and a slow runner still
# finishes.  Emulated aarch64 (cross builds with qemu-user, perf in a qemu-system guest) is documented as
# taking hours and has no measurement here: its limits stay wide.
IMAGE_TIMEOUTS = {
    "base": 30,      # mmdebstrap of the base (packages only, no compile)
    "tools": 45,     # samply, inferno compiled from Debian's Rust crates
    "cell": 30,      # 3 x 291 s + 10 min
    "distro": 90,    # PGO + LTO: 2 x 37.5 min + 10 min (measured under load already)
    "cross": 180,    # aarch64 cross build with qemu-user stages: not measured here
}
CELL_TIMEOUTS = {
    "native": 35,    # 3 x 8 min + 10 min
    "qemu": 300,     # every program under qemu-user, perf in a qemu-system guest: hours, not measured here
}
# What a documentation-only change touches (fnmatch patterns of repository paths): docs/, every Markdown
# file (the README, patches/<version>/README.md, keys/README.md, ...).  Nothing the images or the
# conformance suite read is Markdown.
DOCUMENTATION = ("docs/*", "*.md")


def documentation_only(paths) -> bool:
    """Whether a non-empty list of changed paths touches documentation only."""
    paths = [p.strip() for p in paths if p.strip()]
    return bool(paths) and all(any(fnmatch.fnmatch(p, pattern) for pattern in DOCUMENTATION) for p in paths)


def read_changed_files(path) -> list[str] | None:
    """The changed paths listed in path, or None where the file does not exist (nothing is known)."""
    if not path:
        return None
    try:
        return [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return None


class PlanError(DriverError):
    """A selection the plan cannot honour (unknown cell, arch or selector), or a run too large to shard."""


# --------------------------------------------------------------------------
# selection


@dataclass
class Selection:
    cells: list[str]                                       # matrix order
    why: dict[str, list[str]] = field(default_factory=dict)
    ignored_labels: list[str] = field(default_factory=list)
    documentation_only: bool = False   # the event's own choice left out: the change touches documentation only


def parse_list(value) -> list[str]:
    """Selectors or labels: a comma-separated string, a JSON array (GitHub's toJSON of the labels), or a list."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "null"):
            return []
        if text.startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise PlanError(f"labels {text[:80]!r} are not a JSON array: {exc}") from None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise PlanError(f"labels {text[:80]!r} must be a JSON array of strings")
            return [i.strip() for i in items if i.strip()]
        return [i.strip() for i in text.split(",") if i.strip()]
    return [str(i).strip() for i in value if str(i).strip()]


def _selector(matrix: Matrix, item: str, where: str) -> list[Cell]:
    if item == "all":
        return list(matrix.cells.values())
    kind, sep, value = item.partition(":")
    if sep and kind == "cell":
        try:
            return [matrix.cell(value)]
        except UnknownCell as exc:
            raise PlanError(f"{where}: {exc}") from None
    if sep and kind == "arch":
        if value not in matrix.arches:
            raise PlanError(f"{where}: unknown arch {value!r}; {matrix.path} has {', '.join(matrix.arches)}")
        return matrix.cells_of_arch(value)
    raise PlanError(f"{where}: unknown selector {item!r}: use cell:<name>, arch:<arch> or all")


def is_our_label(label: str) -> bool:
    """Labels the plan reads; a pull request's other labels (bug, documentation, ...) are not ours."""
    return label == "all" or label.startswith(("cell:", "arch:"))


def select_cells(matrix: Matrix, event: str, labels=(), select=(), changed: list[str] | None = None) -> Selection:
    """The cells of a run.  changed: the paths the event changes (None: not known); a documentation-only
    change selects nothing for the event itself."""
    if event not in EVENTS:
        raise PlanError(f"unknown event {event!r}: one of {', '.join(EVENTS)}")
    why: dict[str, list[str]] = {}
    docs_only = changed is not None and event in ("pull_request", "push") and documentation_only(changed)

    def add(cells, reason):
        for cell in cells:
            why.setdefault(cell.name, []).append(reason)

    if select:
        for item in select:
            add(_selector(matrix, item, f"--select {item}"), f"selected: {item}")
    elif docs_only:
        pass   # documentation only: no cell, unless a label asks for one
    elif event == "pull_request":
        add([matrix.cell(n) for n in matrix.smoke_cells], "smoke_cells (pull request)")
    else:
        add(matrix.cells.values(), f"{event}: the whole matrix")
    ignored = []
    for label in labels:
        if is_our_label(label):
            add(_selector(matrix, label, f"label {label!r}"), f"label {label}")
        else:
            ignored.append(label)
    return Selection([name for name in matrix.cells if name in why], why, ignored, docs_only)


# --------------------------------------------------------------------------
# images


def build_host(arch: str, aarch64: str) -> str:
    """The arch of the machine that builds and runs the images of arch's cells: an arm64 runner for aarch64
    placed natively, else an x86_64 one (which runs i386 itself and cross-compiles aarch64)."""
    return "aarch64" if arch == "aarch64" and aarch64 == "native" else DEFAULT_ARCH


def tools_name(host: str) -> str:
    """The tools image of a host: `tools` on x86_64, `tools-<arch>` on another (its samply runs there)."""
    return "tools" if host == DEFAULT_ARCH else f"tools-{host}"


@dataclass
class Image:
    name: str            # base-<arch>, tools[-<arch>], cell-<cell>
    kind: str            # base | tools | cell
    arch: str            # the arch of the image's programs
    group: str           # bases | images | cross_images: the workflow job that builds it
    tag: str
    digest: str
    digest_source: str
    build_arg: str       # base: its arch; cell: the cell; tools: ""
    session: str         # the command the image job runs (documentation; the workflow dispatches on kind)
    needs: list[str] = field(default_factory=list)   # names of the images its build starts from
    host: str = DEFAULT_ARCH   # the arch of the runner that builds it

    @property
    def artifact(self) -> str:
        return f"image-{self.name}-{self.digest[:16]}"

    @property
    def registry_tag(self) -> str:
        """Its repository:tag in the workflow's registry, named by its digest: a cell's as the driver publishes
        and looks it up, the tools image's own tag (its tag is its digest), a base's tag and digest."""
        if self.kind == "cell":
            return registry.published_tag(self.build_arg, self.digest)
        if self.kind == "tools":
            return self.tag
        return f"{self.tag}-{self.digest}"


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def base_image(matrix: Matrix, arch: str, host: str = DEFAULT_ARCH) -> Image:
    """The base of arch's images on a host of that arch: the host's own (its toolchain), or another arch's
    (i386's native one, aarch64's runtime for cross builds)."""
    suite = matrix.base_suite
    if arch == host:
        tag = render.host_base_image_tag(suite, host)
        digest = _sha256(tag.encode(), (render.DOCKER_DIR / "base.Dockerfile.j2").read_bytes())
        how = "the package-list hash of its tag and docker/base.Dockerfile.j2 (registry mode)"
    else:
        tag = render.arch_base_image_tag(suite, arch, host)
        digest = _sha256(tag.encode())
        how = "the package-list hash of its tag (always bootstrapped with mmdebstrap)"
    return Image(f"base-{arch}", "base", arch, "bases", tag, digest, f"plan: {how}", arch,
                 f"python -m cpython_perf base-image --arch {arch}", host=host)


def tools_image(matrix: Matrix, host: str = DEFAULT_ARCH) -> Image:
    # a GitHub runner (Ubuntu) with the repository variable unset, as in a fork's pull request: None, mmdebstrap's
    # default archive, which the image jobs choose alike (the Dockerfile, so the digest, says which)
    archive, source = sources.debian_archive_uri(), "driver: tools.tools_image_tag"
    tag = tools.tools_image_tag(tools.tools_dockerfile(matrix, archive, host))
    return Image(tools_name(host), "tools", host, "images", tag, tag.split(":", 1)[1], source, "",
                 "python -m cpython_perf tools-image", [f"base-{host}"], host=host)


def cell_image(matrix: Matrix, cell: Cell, aarch64: str = "native") -> Image:
    host = build_host(cell.arch, aarch64)
    inputs = pipeline.cell_inputs(cell, matrix.base_suite, log=lambda *_: None, matrix=matrix, fetch=False,
                                  host=host)
    foreign = cell.foreign_on(host)
    if foreign:
        needs = [f"base-{host}", f"base-{cell.arch}", f"cell-{matrix.build_python_cell_on(cell, host).name}"]
    else:
        needs = [f"base-{cell.arch}"]
    return Image(f"cell-{cell.name}", "cell", cell.arch, "cross_images" if foreign else "images",
                 cell.image, inputs.digest,
                 "driver: pipeline.cell_inputs (its image label; the source tarball by its pinned sha256)",
                 cell.name, f"nox -s build-{cell.name}", needs, host=host)


def runtime_images(matrix: Matrix, cell: Cell, aarch64: str = "native") -> list[str]:
    """Images a cell's conformance session uses: its own, its vanilla twin's (CPython's own tests are
    compared with it), and the tools image of the runner it runs on (samply, flame graphs)."""
    names = [f"cell-{cell.name}"]
    twin = matrix.vanilla_twin(cell)
    if twin is not None and not cell.build_only:
        names.append(f"cell-{twin.name}")
    return names + [tools_name(build_host(cell.arch, aarch64))]


def _make(matrix: Matrix, name: str, aarch64: str) -> Image:
    kind, _, rest = name.partition("-")
    if kind == "base":
        return base_image(matrix, rest, build_host(rest, aarch64))
    if kind == "cell":
        return cell_image(matrix, matrix.cell(rest), aarch64)
    return tools_image(matrix, rest or DEFAULT_ARCH)


def needed_images(matrix: Matrix, roots: list[str], aarch64: str = "native") -> dict[str, Image]:
    """roots and every image their builds start from, in build order (bases, images, cross images)."""
    found: dict[str, Image] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = _make(matrix, name, aarch64)
        todo.extend(found[name].needs)
    order = {n: i for i, n in enumerate([f"base-{a}" for a in matrix.arches]
                                        + [tools_name(a) for a in matrix.arches]
                                        + [f"cell-{c}" for c in matrix.cells])}
    return {n: found[n] for n in sorted(found, key=lambda n: (GROUPS.index(found[n].group), order[n]))}


# --------------------------------------------------------------------------
# jobs


def pattern(artifacts: list[str]) -> str:
    """A download-artifact `pattern` (minimatch) matching exactly these artifact names."""
    if not artifacts:
        return ""
    return artifacts[0] if len(artifacts) == 1 else "{" + ",".join(artifacts) + "}"


def _runs_foreign_code(runner: str, arches) -> bool:
    return any(arch not in RUNNERS[runner][1] for arch in arches)


def image_timeout(matrix: Matrix, image: Image) -> int:
    """The image job's time limit in minutes (IMAGE_TIMEOUTS)."""
    if image.kind != "cell":
        return IMAGE_TIMEOUTS[image.kind]
    if image.group == "cross_images":
        return IMAGE_TIMEOUTS["cross"]
    cell = matrix.cell(image.build_arg)
    optimised = any(o == "--enable-optimizations" or o.startswith("--with-lto") for o in cell.configure_args())
    return IMAGE_TIMEOUTS["distro" if optimised else "cell"]


def image_job(image: Image, built: dict[str, Image], matrix: Matrix | None = None) -> dict:
    needs = [built[n].artifact for n in image.needs]
    return {
        "name": image.name, "kind": image.kind, "arch": image.arch, "group": image.group, "tag": image.tag,
        "digest": image.digest, "digest_source": image.digest_source, "artifact": image.artifact,
        "registry_tag": image.registry_tag,
        "build_arg": image.build_arg, "session": image.session, "runner": NATIVE_RUNNER[image.host],
        "host": image.host,
        # binfmt qemu-user on the runner: the build runs programs of another arch (an arm64 base or the
        # arm64 stage of a cross build)
        "qemu_user": _runs_foreign_code(NATIVE_RUNNER[image.host], [image.arch]),
        "needs": needs, "needs_pattern": pattern(needs),
        # the images its build starts from, in the order of needs: their local tags and registry tags
        "needs_tags": [built[n].tag for n in image.needs],
        "needs_registry_tags": [built[n].registry_tag for n in image.needs],
        "timeout_minutes": image_timeout(matrix, image) if matrix is not None else IMAGE_TIMEOUTS["cross"],
    }


def cell_job(matrix: Matrix, cell: Cell, built: dict[str, Image], aarch64: str) -> dict:
    host = build_host(cell.arch, aarch64)
    runner = NATIVE_RUNNER[host]
    execution = "qemu" if cell.foreign_on(host) else "native"
    used = [built[n] for n in runtime_images(matrix, cell, aarch64)]
    artifacts = [i.artifact for i in used]
    if cell.build_only:
        perf = "none: build-only (no perf trampoline on this arch)"
    elif cell.foreign_on(host):
        # the driver's Cell.foreign on that runner: recordings boot the cell's image in qemu-system-aarch64
        perf = "qemu-system guest"
    else:
        perf = "containers"
    return {
        "cell": cell.name, "arch": cell.arch, "version": cell.recipe.version, "variant": cell.variant.name,
        "vanilla": cell.vanilla, "modes": list(cell.modes), "build_only": cell.build_only,
        "runner": runner, "runner_arch": RUNNERS[runner][0], "execution": execution,
        "qemu_user": _runs_foreign_code(runner, [i.arch for i in used]),
        "perf": perf,
        "images": artifacts, "images_pattern": pattern(artifacts), "image_tags": [i.tag for i in used],
        "registry_tags": [i.registry_tag for i in used],
        "session": f"conformance-{cell.name}", "results": f"results-{cell.name}",
        "timeout_minutes": CELL_TIMEOUTS[execution],
    }


def shard(jobs: list, group: str, limit: int = MAX_MATRIX_JOBS, shards: int | None = None) -> list[list]:
    """jobs split into SHARDS[group] lists of at most limit each (empty ones at the end)."""
    shards = SHARDS[group] if shards is None else shards
    chunks = [jobs[i:i + limit] for i in range(0, len(jobs), limit)]
    if len(chunks) > shards:
        raise PlanError(f"{len(jobs)} jobs of {group} need {len(chunks)} matrices of at most {limit} jobs; "
                        f".github/workflows/matrix.yml declares {shards}: add jobs {group.replace('_', '-')}-"
                        f"{shards}.. reading needs.plan.outputs.{group}_{shards}.. and raise SHARDS[{group!r}] "
                        "in cpython_perf/ci/plan.py")
    return chunks + [[] for _ in range(shards - len(chunks))]


def build_plan(matrix: Matrix, event: str = "pull_request", labels=(), select=(), aarch64: str = "native",
               changed: list[str] | None = None) -> dict:
    if aarch64 not in AARCH64_PLACEMENTS:
        raise PlanError(f"--aarch64 must be one of {', '.join(AARCH64_PLACEMENTS)}, not {aarch64!r}")
    selection = select_cells(matrix, event, parse_list(labels), parse_list(select), changed)
    cells = [matrix.cell(n) for n in selection.cells]
    # the report job renders flame graphs with the x86_64 tools image, whichever runners the cells ran on
    roots = [n for cell in cells for n in runtime_images(matrix, cell, aarch64)] + (["tools"] if cells else [])
    built = needed_images(matrix, roots, aarch64)
    image_jobs = [image_job(image, built, matrix) for image in built.values()]
    cell_jobs = [cell_job(matrix, cell, built, aarch64) for cell in cells]
    report_used = [built["tools"]] if "tools" in built else []
    report_images = [i.artifact for i in report_used]
    report = {"runner": X86_RUNNER, "session": "report", "images": report_images,
              "images_pattern": pattern(report_images), "image_tags": [i.tag for i in report_used],
              "registry_tags": [i.registry_tag for i in report_used], "results_pattern": "results-*",
              "artifact": "report"}
    shards: dict[str, list[str]] = {}
    for group in GROUPS:
        if group == "cells":
            members = [job["cell"] for job in cell_jobs]
        else:
            members = [job["name"] for job in image_jobs if job["group"] == group]
        for i, part in enumerate(shard(members, group)):
            shards[f"{group}_{i}"] = part
    return {
        "event": event, "aarch64": aarch64,
        "selection": {"cells": selection.cells, "why": selection.why, "ignored_labels": selection.ignored_labels},
        "changes": {"files": None if changed is None else len(changed),
                    "documentation_only": selection.documentation_only},
        "images": image_jobs, "cells": cell_jobs, "report": report, "shards": shards,
        "counts": {"images": len(image_jobs), "cells": len(cell_jobs),
                   # plan + images + cells + report (skipped where no cell is selected)
                   "jobs": 1 + len(image_jobs) + len(cell_jobs) + (1 if cell_jobs else 0)},
    }


def github_outputs(plan: dict) -> dict[str, str]:
    """The plan job's outputs: one JSON list of matrix entries per shard, and the report job."""
    by_name = {job["name"]: job for job in plan["images"]}
    by_cell = {job["cell"]: job for job in plan["cells"]}
    out = {}
    for key, members in plan["shards"].items():
        table = by_cell if key.startswith("cells_") else by_name
        out[key] = json.dumps([table[m] for m in members], separators=(",", ":"))
    out["report"] = json.dumps(plan["report"], separators=(",", ":"))
    return out


# --------------------------------------------------------------------------
# command line (cli.py: `python -m cpython_perf plan`)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event", choices=EVENTS, default="pull_request",
                        help="the GitHub event: pull_request runs smoke_cells, the others every cell")
    parser.add_argument("--labels", default="",
                        help="pull-request labels, comma-separated or a JSON array: cell:<name>, arch:<arch> and "
                             "all add cells; other labels are ignored")
    parser.add_argument("--select", default="",
                        help="cell:<name>, arch:<arch> or all, comma-separated: run these instead of the event's choice")
    parser.add_argument("--aarch64", choices=AARCH64_PLACEMENTS, default="native",
                        help=f"aarch64 cells on {ARM_RUNNER} (native, default) or emulated on {X86_RUNNER} (qemu)")
    parser.add_argument("--changed-files", metavar="FILE", default=None,
                        help="the paths the event changes, one a line: documentation only (docs/, *.md) selects no "
                             "cell for the event (labels and --select still do); a missing FILE means not known")
    parser.add_argument("--github-output", metavar="FILE", default=None,
                        help="also append the job matrices as name=value lines to FILE ($GITHUB_OUTPUT)")


def run(matrix: Matrix, args) -> None:
    plan = build_plan(matrix, args.event, args.labels, args.select, args.aarch64,
                      read_changed_files(getattr(args, "changed_files", None)))
    if args.github_output:
        with open(args.github_output, "a") as out:
            for key, value in github_outputs(plan).items():
                out.write(f"{key}={value}\n")
    json.dump(plan, sys.stdout, indent=1)
    sys.stdout.write("\n")
