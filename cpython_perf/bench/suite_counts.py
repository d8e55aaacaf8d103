"""The standard suite's instruction counts: each benchmark under `valgrind --tool=cachegrind --cache-sim=no`
in pyperf's worker mode (`--worker --warmups 0 --values 1 --loops N`) with L and 2L loops; one loop =
(I(2L) - I(L)) / L, so interpreter start-up, pyperf's import and each benchmark's set-up cancel out.
PYTHONHASHSEED=0.  After each run the container's /tmp is listed: a perf map or jitdump must exist exactly
when the configuration activates a trampoline.
"""

from __future__ import annotations

import math
import re
import time

from ..errors import DriverError
from .common import INACTIVE, Configuration
from .instructions import parse_instructions, valgrind_image
from .suite_containers import CONTAINER_PYPERF, last_error, run_benchmark
from .suite_pins import SuiteFiles
from .suite_plan import Benchmark

MAP_MARK = "@@cpython-perf-maps:"


def worker_command(config: Configuration, benchmark: Benchmark, loops: int) -> list[str]:
    """pyperf's worker mode in this process: no calibration, no warm-up, one value of `loops` loops."""
    return ["python3", *config.argv, "-u", benchmark.script, *benchmark.extra_opts,
            "--worker", "--loops", str(loops), "--warmups", "0", "--values", "1"]


def trampoline_check_script(command: list[str]) -> str:
    """command, then how many perf maps / jitdumps it left in /tmp (the container's own), exiting as it did."""
    quoted = " ".join("'" + part.replace("'", "'\\''") + "'" for part in command)
    return (f"{quoted}; rc=$?; echo \"{MAP_MARK}$(ls /tmp | grep -c -E '^(perf-[0-9]+[.]map|jit-[0-9]+[.]dump)$')\"; "
            "exit $rc")


def maps_written(stdout: str) -> int:
    found = [line for line in stdout.splitlines() if line.startswith(MAP_MARK)]
    if not found:
        raise DriverError(f"the run printed no {MAP_MARK} line:\n{stdout[-1000:]}")
    return int(found[-1][len(MAP_MARK):])


def check_trampoline_state(config: Configuration, maps: int) -> None:
    active = config.label != INACTIVE
    if bool(maps) != active:
        raise DriverError(f"{config.key}: {maps} perf map / jitdump file(s) written, "
                          f"expected {'some' if active else 'none'}: the trampoline is not in the configured state")


class BenchmarkFailed(DriverError):
    """A benchmark that does not run in a configuration (recorded, left out of its comparisons)."""


def count_run(client, image: str, files: SuiteFiles, config: Configuration, benchmark: Benchmark, loops: int) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
               *worker_command(config, benchmark, loops)]
    result = run_benchmark(client, image, trampoline_check_script(command), files,
                           env={"PYTHONHASHSEED": "0", "PYTHONPATH": CONTAINER_PYPERF})
    if result.exit_code != 0:
        raise BenchmarkFailed(f"{benchmark.name} in {config.key} exited {result.exit_code}: {last_error(result.stderr)}")
    check_trampoline_state(config, maps_written(result.stdout))
    return main_process_instructions(result.stderr)


_I_REFS_BY_PID = re.compile(r"^==(\d+)==\s+I\s+refs:\s+([\d,]+)", re.M)


def main_process_instructions(stderr: str) -> int:
    """The 'I refs' of the benchmark's own process.  A process it forks without exec (a subprocess whose exec
    fails, say) stays under valgrind and prints its own total, inherited counts included; the benchmark's
    process is the one started first: the lowest PID in the container."""
    found = {int(pid): int(count.replace(",", "")) for pid, count in _I_REFS_BY_PID.findall(stderr)}
    if not found:
        return parse_instructions(stderr)   # its error names the problem
    return found[min(found)]


def loops_for(one_loop: float, minimum: int) -> int:
    """The smallest L for which L loops count at least `minimum` instructions."""
    return max(1, math.ceil(minimum / max(one_loop, 1)))


def per_loop(low: int, high: int, loops: int, what: str) -> float:
    if high <= low:
        raise BenchmarkFailed(f"{what}: {2 * loops} loops counted {high:,} instructions, {loops} loop(s) {low:,}")
    return (high - low) / loops


def count_benchmarks(client, cell_images: dict[str, str], files: SuiteFiles, configs: list[Configuration],
                     benchmarks: list[Benchmark], min_loop_instructions: int, ins: dict, progress, log=print) -> None:
    """Every benchmark in every configuration counted in the valgrind image of its cell's image (cell_images:
    cell name -> image), into ins (the results' "instructions": loops, timings, raw counts, failures, seconds);
    progress saved after each.  L is chosen on the first configuration, the smallest whose loops count at least
    min_loop_instructions, and used for all; a benchmark that fails in a configuration is recorded there."""
    vg = {name: valgrind_image(client, image, log) for name, image in cell_images.items()}
    for benchmark in benchmarks:
        name = benchmark.name
        for config_ in configs:
            started = time.monotonic()
            try:
                loops = ins["loops"].get(name)
                if loops is None:
                    low = count_run(client, vg[config_.cell.name], files, config_, benchmark, 1)
                    high = count_run(client, vg[config_.cell.name], files, config_, benchmark, 2)
                    loops = loops_for(per_loop(low, high, 1, f"{config_.key} {name}"), min_loop_instructions)
                    ins["loops"][name] = loops
                    while loops > 1:   # until L loops count at least min_loop_instructions
                        low = count_run(client, vg[config_.cell.name], files, config_, benchmark, loops)
                        high = count_run(client, vg[config_.cell.name], files, config_, benchmark, 2 * loops)
                        again = loops_for(per_loop(low, high, loops, f"{config_.key} {name}"), min_loop_instructions)
                        if again <= loops:
                            break
                        loops = ins["loops"][name] = again
                else:
                    low = count_run(client, vg[config_.cell.name], files, config_, benchmark, loops)
                    high = count_run(client, vg[config_.cell.name], files, config_, benchmark, 2 * loops)
                value = per_loop(low, high, loops, f"{config_.key} {name}")
                ins["timings"][config_.key][name] = [[value]]
                ins["raw"][config_.key][name] = [low, high]
                log(f"{config_.key} {name}: {value:,.0f} instructions a loop (L={loops}, "
                    f"{time.monotonic() - started:.0f} s)")
            except BenchmarkFailed as exc:
                ins["failures"].setdefault(config_.key, {})[name] = str(exc)
                log(f"{config_.key} {name}: FAILED: {exc}")
            ins["seconds"][config_.key] += time.monotonic() - started
            progress.save()
