# requires: perf
# records: perf
# checks: behaviour
"""Every Python frame of the shapes the eval loop can run without a C call has its own py:: frame.

From 3.11 the interpreter runs many Python frames inline in its caller's loop
(specialized calls, a Python __getitem__ reached by obj[i], from 3.12 an
await or yield from of a coroutine or generator, a property's getter) when no
PEP 523 evaluator is set.  Under the perf trampoline such a frame must still
be entered through the trampoline, or perf charges its samples to its caller.
Recorded with real perf (frame pointers, `perf record -g`), once with -X perf
from the start (sites specialized under the trampoline) and once with
sys.activate_stack_trampoline("perf") called after every shape ran hot
without it (sites specialized before).  Each shape's leaf does nearly all of
the work; must hold, for each shape in each run: of the samples taken in its
leaf (at least 30), at least 80% show the whole chain of Python frames from
the leaf out to the shape's driver, each with its own py:: frame, in order
and with nothing between them.  Exit 2 (cannot check) without perf and where
the interpreter is not built with frame pointers (perf -g cannot walk its
stack).
"""
import shutil
import sys
import tempfile

from childcheck import (finish, frame_pointer_recording_unavailable, perf_record_failure, perf_record_program,
                        perf_script_samples, perf_script_text, recorded_program_failure)

CANNOT_CHECK = 2
MIN_FRACTION = 0.8
MIN_SAMPLES = 30

# The chain of each shape, innermost first, as the perf map names the code: co_qualname from 3.11,
# co_name before (patches/3.9/README.md).
QUALNAMES = sys.version_info >= (3, 11)
SHAPES = {
    "await chain": ["aleaf", "amiddle", "atop", "drive_await"],
    "exact-args calls": ["cleaf", "cmiddle", "ctop", "drive_calls"],
    "calls with defaults and keywords": ["kleaf", "kmiddle", "drive_keywords"],
    "method calls": ["Box.leaf" if QUALNAMES else "leaf", "Box.middle" if QUALNAMES else "middle",
                     "drive_methods"],
    "property": ["Box.value" if QUALNAMES else "value", "drive_property"],
    "__getitem__": ["Box.__getitem__" if QUALNAMES else "__getitem__", "drive_getitem"],
    "yield from chain": ["gleaf", "gmiddle", "drive_generators"],
}

PROGRAM = r'''
import sys
import time

WORK = 3000
# The drivers loop with `while True` and break: 3.11 quickens (specializes) a function's code only after
# it ran a while, counted at calls and at JUMP_BACKWARD, which `while cond:` does not compile to; each
# driver is called once, so only this makes its loop's instructions specialize.


async def aleaf(n):
    total = 0
    for i in range(n):
        total += i
    return total


async def amiddle(n):
    return await aleaf(n)


async def atop(n):
    return await amiddle(n)


def drive_await(deadline):
    while True:
        if time.perf_counter() >= deadline:
            break
        coro = atop(WORK)
        try:
            coro.send(None)
        except StopIteration:
            pass


def cleaf(n):
    total = 0
    for i in range(n):
        total += i
    return total


def cmiddle(n):
    return cleaf(n)


def ctop(n):
    return cmiddle(n)


def drive_calls(deadline):
    while True:
        if time.perf_counter() >= deadline:
            break
        ctop(WORK)


def kleaf(n, step=1):
    total = 0
    for i in range(0, n, step):
        total += i
    return total


def kmiddle(n, scale=1):
    return kleaf(n=n * scale)


def drive_keywords(deadline):
    while True:
        if time.perf_counter() >= deadline:
            break
        kmiddle(WORK)


class Box:
    def leaf(self, n):
        total = 0
        for i in range(n):
            total += i
        return total

    def middle(self, n):
        return self.leaf(n)

    @property
    def value(self):
        total = 0
        for i in range(WORK):
            total += i
        return total

    def __getitem__(self, n):
        total = 0
        for i in range(n):
            total += i
        return total


def drive_methods(deadline):
    box = Box()
    while True:
        if time.perf_counter() >= deadline:
            break
        box.middle(WORK)


def drive_property(deadline):
    box = Box()
    while True:
        if time.perf_counter() >= deadline:
            break
        box.value


def drive_getitem(deadline):
    box = Box()
    while True:
        if time.perf_counter() >= deadline:
            break
        box[WORK]


def gleaf(n):
    for i in range(n // 100):
        total = 0
        for j in range(100):
            total += j
        yield total


def gmiddle(n):
    yield from gleaf(n)


def drive_generators(deadline):
    while True:
        if time.perf_counter() >= deadline:
            break
        for _ in gmiddle(WORK):
            pass


DRIVERS = [drive_await, drive_calls, drive_keywords, drive_methods, drive_property, drive_getitem,
           drive_generators]

if sys.argv[1] == "activate":
    for drive in DRIVERS:             # hot and specialized without the trampoline
        drive(time.perf_counter() + 0.05)
    sys.activate_stack_trampoline("perf")
for drive in DRIVERS:
    # called from C (map): the driver has its own py:: frame however the shapes inside it run
    list(map(drive, [time.perf_counter() + 0.5]))
print("ran", len(DRIVERS))
'''


def check_run(label, text):
    """Problems of one recording (its perf script text)."""
    problems = []
    samples = perf_script_samples(text)
    for shape, chain in SHAPES.items():
        driver = chain[-1]
        inside, whole = 0, 0
        seen = {}
        for _header, stack in samples:
            py = [sym.split(":", 3)[2] for _ip, sym in stack if sym.startswith("py::")]
            if driver not in py:
                continue
            inside += 1
            got = tuple(py[:py.index(driver) + 1])   # innermost Python frame out to the driver
            seen[got] = seen.get(got, 0) + 1
            if list(got[-len(chain):]) == chain:
                whole += 1
        fraction = whole / inside if inside else 0.0
        print(f"{label}: {shape}: {inside} samples inside py::{driver}, {whole} ({fraction:.0%}) "
              f"with the whole chain {' <- '.join(chain)}")
        if inside < MIN_SAMPLES:
            problems.append(f"{label}: {shape}: too few samples inside py::{driver} ({inside})")
        elif fraction < MIN_FRACTION:
            common = sorted(seen.items(), key=lambda kv: -kv[1])[:3]
            problems.append(f"{label}: {shape}: only {fraction:.0%} of the samples inside py::{driver} show "
                            f"{' <- '.join(chain)} (at least {MIN_FRACTION:.0%} demanded): a frame without a "
                            f"trampoline of its own is charged to its caller; chains seen most: "
                            + "; ".join(f"{' <- '.join(c)} ({n})" for c, n in common))
    return problems


def main():
    why = frame_pointer_recording_unavailable()
    if why:
        print(f"cannot check: {why}")
        return CANNOT_CHECK
    problems = []
    for label, python_args, argv in (("-X perf", ["-X", "perf"], "from-start"),
                                     ("activated when hot", [], "activate")):
        workdir = tempfile.mkdtemp()
        try:
            program = PROGRAM.replace("sys.argv[1]", repr(argv))
            rec, data = perf_record_program(workdir, "fast_paths.py", program, python_args)
            crashed = recorded_program_failure(rec, data)
            if crashed:
                return finish([crashed])
            failed = perf_record_failure(rec, data)
            if failed:
                print(f"cannot check: {failed}")
                return CANNOT_CHECK
            if "ran" not in rec.stdout:
                problems.append(f"{label}: the program did not finish: {rec.stdout.strip()[-300:]} "
                                f"{rec.stderr.strip()[-600:]}")
                continue
            problems += check_run(label, perf_script_text(data, "ip,sym"))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
