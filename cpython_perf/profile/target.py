"""What a profile run's program runs in, and the perf mode it is recorded in.

A Target is an image, the python to run there, its perf command and the modes it allows: a cell's
(cell_target: the perf modes it claims in matrix.yaml), or any image and the path of a Python in it
(external_target: the interpreter probed for the backends it offers, as the conformance suite's external
target does).  choose_mode takes a requested mode the target allows (anything else is a usage error naming
the valid ones), else default_mode: perf where the target allows it and has frame pointers, else perf_jit.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..errors import DriverError
from ..matrix import PERF_MODES, Matrix

MODE_WHY = {"perf": "frame pointers: perf record -g, unwound by the kernel",
            "perf_jit": "no frame pointers needed: dwarf unwinding of a copied stack, then the jit injection "
                        "(one ELF per trampoline arena)"}


class ProfileFailed(DriverError):
    """A run-time failure of a profile run (exit status 1; usage errors stay 2)."""

    exit_code = 1


@dataclass(frozen=True)
class Target:
    """What the program runs in: an image, the python to run there, the perf command and the modes allowed."""

    label: str                      # a cell name, or image + python
    image: str
    python: str                     # python3 on PATH in a cell image; --python for an external one
    perf: str                       # the image's perf command (an external image's may be perf_X.Y)
    modes: tuple[str, ...]          # the cell's claims; an external interpreter's offered backends
    run_spec: object                # the Cell or ExternalTarget perf_runs.record_options reads
    cell: object | None = None      # the matrix Cell, if any
    facts: object | None = None     # external.TargetFacts of an --image target


def cell_target(matrix: Matrix, name: str) -> Target:
    """A cell's target; the usage errors of a cell that cannot be profiled here."""
    cell = matrix.cell(name)   # UnknownCell, exit 2
    if cell.build_only:
        raise DriverError(f"{cell.name} is build-only ({cell.arch} has no perf trampoline): nothing to profile")
    if cell.foreign:
        raise DriverError(f"{cell.name} is an {cell.arch} cell, emulated on this {os.uname().machine} host: perf "
                          "cannot sample a program under qemu-user; profile a cell of this host's arch")
    if not cell.modes:
        raise DriverError(f"{cell.name} claims no perf mode in {matrix.path} (a vanilla twin): nothing to profile")
    return Target(cell.name, cell.image, "python3", "perf", tuple(cell.modes), cell, cell=cell)


def choose_mode(target: Target, requested: str | None) -> str:
    """The mode to record in: requested if the target allows it, else a usage error naming the valid ones;
    without a request the target's default (default_mode)."""
    if requested is None:
        return default_mode(target)
    if requested not in target.modes:
        what = "claims" if target.cell is not None else "offers"
        raise DriverError(f"{target.label} does not support perf mode {requested!r}: it {what} "
                          f"{', '.join(target.modes) or 'none'} (valid: --mode {' | --mode '.join(target.modes)})")
    return requested


def default_mode(target: Target) -> str:
    """perf where allowed and frame pointers are there (every cell claiming perf has them; an external
    interpreter's sysconfig CFLAGS are asked), else perf_jit where allowed, else what is allowed."""
    if not target.modes:
        raise DriverError(f"{target.label} offers no perf mode: nothing to profile")
    if "perf" in target.modes and target.facts is not None:
        from ..check.external import cflags_frame_pointers

        if cflags_frame_pointers(target.facts.python.get("config", {})) is not True and "perf_jit" in target.modes:
            return "perf_jit"
    return "perf" if "perf" in target.modes else target.modes[0]


def image_id(client, ref: str) -> str | None:
    """The id of an image here, None if there is none."""
    import docker.errors

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def external_target(client, image: str, python: str, run) -> Target:
    """An --image/--python target: the interpreter probed for the backends it offers, the image for its perf."""
    from ..check import external

    if image_id(client, image) is None:
        raise DriverError(f"image {image} does not exist here (docker pull or build it)")
    spec = external.ExternalTarget(image, python)
    probe = run([python, "-c", external.PYTHON_PROBE])
    if probe.exit_code != 0:
        raise DriverError(f"{python} does not run in {image} (exit {probe.exit_code}): "
                          f"{(probe.stderr or probe.stdout).strip()[-500:]}")
    facts = external.TargetFacts(json.loads(probe.stdout.strip().splitlines()[-1]),
                                 external.parse_perf_candidates(run(external.PERF_PROBE).stdout))
    if not facts.perf.command:
        raise ProfileFailed(f"no perf in {image}: {'; '.join(facts.perf.notes) or 'no perf command'} "
                            "(Debian: install linux-perf)")
    offered = tuple(m for m in PERF_MODES if facts.offers(m))
    if not offered:
        raise ProfileFailed(f"{python} in {image} (Python {facts.version_text}) offers no perf trampoline: "
                            "neither -X perf nor -X perf_jit writes a map")
    return Target(f"{image} {python}", image, python, facts.perf.command, offered, spec, facts=facts)
