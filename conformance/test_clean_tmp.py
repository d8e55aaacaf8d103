"""clean-tmp in a cell container: it removes the maps of -X perf processes that are gone, and none that is needed.

In the cell's container, with its own Python running `python3 -m cpython_perf.record.clean_tmp` (the
module needs the standard library only), /tmp holds the perf maps of:

- a parent and its three short-lived workers, all exited: removed, except
- one of those workers' maps, which a process (`sleep`) holds open: kept;
- a process that still runs: kept;
- a process that has exited but that a finished `perf record` recorded (`--keep-for` its perf.data,
  read without perf): kept.

Then, with another exited process's map in /tmp and a `perf record` writing to a pipe running beside it,
clean-tmp removes nothing (which processes that recording holds cannot be read until it ends), and says so.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import not_applicable

# skipped on build-only cells; also run on an --image/--python target, e.g. a deb lane's installed package
pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]
DRIVER = Path(__file__).resolve().parent.parent / "cpython_perf"

SHELL = r"""
set -eu
cd /src
export PYTHONPATH=/driver
CLEAN="$PY -m cpython_perf.record.clean_tmp --older-than 0"
$PY -X perf /src/outside_workers.py /dev/null 0.2 3 > workers.txt
HELD=$(awk '$1 == "worker" {print $2; exit}' workers.txt)
sleep 60 < /tmp/perf-$HELD.map &
HOLDER=$!
$PY -X perf -c 'import os, time; print(os.getpid(), flush=True); time.sleep(60)' > live.txt &
LIVE=$!
$PERF record -q $PERF_EVENT -g -o /src/kept.data -- $PY -X perf -c 'import os; print(os.getpid())' > recorded.txt
while [ ! -s live.txt ]; do sleep 0.05; done
$CLEAN --keep-for /src/kept.data > first.txt
$PY -X perf -c 'import os; print(os.getpid())' > later.txt
$PERF record -q $PERF_EVENT -o - -- sleep 4 | cat > /dev/null &
PIPE=$!
sleep 1.5
$CLEAN > second.txt
wait $PIPE
$CLEAN --keep-for /src/kept.data > third.txt
kill $HOLDER $LIVE
ls /tmp > left.txt
"""


def decisions(text: str) -> dict[str, tuple[str, str]]:
    """name -> (remove | keep, why) of clean-tmp's output."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(remove|keep|would remove)\s+(\S+)\s+\(\d+ bytes\): (.*)$", line)
        if m:
            out[m.group(2)] = (m.group(1), m.group(3))
    return out


def test_clean_tmp_beside_real_processes_and_recordings(cell, runner_for, record_property):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user")
    if "perf" not in cell.check_backends:   # perf maps, not chains: no frame pointers needed
        not_applicable("mode:perf", f"{cell.name}'s interpreter does not offer perf")
    runner = runner_for(cell)
    runner.extra_mounts[DRIVER] = "/driver/cpython_perf"
    event = f"-e {runner.event}" if runner.event else ""
    settings = f"PERF_EVENT='{event}'\nPY={shlex.quote(runner.python)}\nPERF={shlex.quote(runner.perf)}\n"
    result = runner.run(settings + SHELL, timeout=300)
    src = runner.src
    said = {name: (src / name).read_text() if (src / name).exists() else ""
            for name in ("workers.txt", "live.txt", "recorded.txt", "later.txt", "first.txt", "second.txt",
                         "third.txt", "left.txt")}
    print("\n".join(f"--- {k}\n{v}" for k, v in said.items()))
    assert result.exit_code == 0, f"the run failed (exit {result.exit_code}): {result.stderr[-2000:]}"
    main = int(re.search(r"main (\d+)", said["workers.txt"]).group(1))
    workers = [int(p) for p in re.findall(r"worker (\d+)", said["workers.txt"])]
    live, recorded, later = (int(said[n].split()[0]) for n in ("live.txt", "recorded.txt", "later.txt"))
    held = workers[0]

    first = decisions(said["first.txt"])
    record_property("first_run", {k: v[0] for k, v in first.items()})
    for pid in [main, *workers[1:]]:
        assert first.get(f"perf-{pid}.map", ("?",))[0] == "remove", f"perf-{pid}.map (gone) was not removed: {first}"
    assert first[f"perf-{held}.map"][0] == "keep" and "open in process" in first[f"perf-{held}.map"][1]
    assert first[f"perf-{live}.map"][0] == "keep" and "is running" in first[f"perf-{live}.map"][1]
    assert first[f"perf-{recorded}.map"][0] == "keep" and "a recording names" in first[f"perf-{recorded}.map"][1]

    second = decisions(said["second.txt"])
    assert second[f"perf-{later}.map"][0] == "keep" and "pipe" in second[f"perf-{later}.map"][1], second
    assert not any(d == "remove" for d, _ in second.values()), second
    third = decisions(said["third.txt"])
    assert third[f"perf-{later}.map"][0] == "remove", f"once the recording ended, the map stayed: {third}"

    left = set(said["left.txt"].split())
    assert {f"perf-{held}.map", f"perf-{live}.map", f"perf-{recorded}.map"} <= left
    assert not {f"perf-{pid}.map" for pid in [main, *workers[1:], later]} & left
