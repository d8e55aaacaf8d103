# requires: perf
# fixes: patches/3.13/0020
# records: perf
"""Every __init__ called by instantiating a class is seen by the frame evaluator: a py:: frame in a perf recording.

From 3.12 the interpreter specializes `Obj(...)` for a Python class as
CALL_ALLOC_AND_ENTER_INIT, which pushes __init__'s frame itself; 3.13.5 does
so even while a PEP 523 evaluator (the perf trampoline, a debugger's) is set,
so after the first calls __init__ ran inline in its caller's loop, unseen by
the evaluator: without a trampoline, and perf charged its samples to the
caller.  Recorded with real perf (frame pointers, `perf record -g`, -X perf):
the catalogue's shape_init.py, whose make_many() instantiates Obj for at least
0.4 s (shape_probe.DURATION), nearly all of the work in Obj.__init__.  Must
hold: of the samples whose Python frames include py::make_many, at least 80%
show py::Obj.__init__ directly inside it.  And, where _testinternalcapi offers
its recording evaluator (3.11+ builds with the test modules), that evaluator,
set after the call site was specialized without one, records an __init__
frame for each of 10 instantiations.  Exit 2 (cannot check) on 3.13's
free-threaded build (which does not specialize), and where neither part can
run: no perf, or an interpreter built without frame pointers (perf -g cannot
walk its stack), and no recording evaluator.
"""
import os
import shutil
import sys
import sysconfig
import tempfile

from childcheck import (finish, frame_pointer_recording_unavailable, perf_record_failure, perf_record_program,
                        perf_script_samples, perf_script_text, recorded_program_failure)

CANNOT_CHECK = 2
MIN_FRACTION = 0.8
# before 3.11 there is no co_qualname: the map names code by co_name (patches/3.9/README.md)
INIT = "Obj.__init__" if sys.version_info >= (3, 11) else "__init__"

# The catalogue's instantiation shape (shape_init.py: make_many instantiates Obj in a hot loop, Obj.__init__
# does the work), run from the check's own directory beside its helper module
SHAPE_FILES = ("shape_init.py", "shape_probe.py")
PROGRAM = 'import shape_init\nprint("made", shape_init.main())\n'


class Plain:
    def __init__(self, v):
        self.v = v


def instantiate(n):
    for i in range(n):
        Plain(i)


def recording_evaluator_problems():
    """None if _testinternalcapi has no recording evaluator here, else the problems found with it."""
    try:
        from _testinternalcapi import set_eval_frame_default, set_eval_frame_record
    except ImportError:
        return None
    instantiate(1000)        # hot: its call site specialized without an evaluator
    frames = []
    set_eval_frame_record(frames)
    try:
        instantiate(10)
    finally:
        set_eval_frame_default()
    seen = frames.count("__init__")
    print(f"recording evaluator set after the call site was specialized: {seen} __init__ frames "
          "for 10 instantiations")
    if seen != 10:
        return [f"a PEP 523 evaluator saw {seen} __init__ frames for 10 instantiations: __init__ runs "
                "inline, unseen by it"]
    return []


def main():
    if sys.version_info[:2] == (3, 13) and sysconfig.get_config_var("Py_GIL_DISABLED"):
        # 3.13's free-threaded build does not specialize: __init__ always goes through the evaluator there
        print("cannot check: 3.13's free-threaded build does not specialize calls (no CALL_ALLOC_AND_ENTER_INIT)")
        return CANNOT_CHECK
    recorder = recording_evaluator_problems()
    why = frame_pointer_recording_unavailable()
    if why:
        if recorder is None:
            print(f"cannot check: {why}; and no recording evaluator here")
            return CANNOT_CHECK
        print(f"perf recording not checked: {why}")
        return finish(recorder)
    problems = list(recorder or [])
    workdir = tempfile.mkdtemp()
    try:
        for name in SHAPE_FILES:
            shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), workdir)
        rec, data = perf_record_program(workdir, "instantiate.py", PROGRAM, ["-X", "perf"])
        crashed = recorded_program_failure(rec, data)
        if crashed:
            return finish(problems + [crashed])
        failed = perf_record_failure(rec, data)
        if failed:
            if problems or recorder is not None:
                print(f"perf recording not checked: {failed}")
                return finish(problems)
            print(f"cannot check: {failed}")
            return CANNOT_CHECK
        if "made" not in rec.stdout:
            problems.append(f"the program did not finish: {rec.stdout.strip()[-300:]} {rec.stderr.strip()[-600:]}")
            return finish(problems)
        inside, with_init = 0, 0
        for _header, stack in perf_script_samples(perf_script_text(data, "ip,sym")):
            py = [sym.split(":", 3)[2] for _ip, sym in stack if sym.startswith("py::")]
            if "make_many" not in py:
                continue
            inside += 1
            at = py.index("make_many")
            if at > 0 and py[at - 1] == INIT:
                with_init += 1
        fraction = with_init / inside if inside else 0.0
        print(f"samples inside py::make_many: {inside}; with py::{INIT} directly inside it: {with_init} "
              f"({fraction:.0%})")
        if inside < 50:
            problems.append(f"too few samples inside py::make_many ({inside})")
        elif fraction < MIN_FRACTION:
            problems.append(f"only {fraction:.0%} of the samples inside py::make_many show py::{INIT} "
                            f"(at least {MIN_FRACTION:.0%} demanded): __init__ runs without its own trampoline")
        return finish(problems)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
