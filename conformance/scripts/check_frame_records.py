# requires: perf
# checks: series
# records: perf
"""Under -X perf, Python frames run inline are shown to perf by frame records, in order, and only them.

In an x86-64 GCC build with frame pointers (3.13's patch 31, 3.11's patch 9;
sysconfig's CEVAL_FRAME_RECORDS_CFLAGS), the eval loop runs a frame pushed under the
trampoline inline and writes a frame record naming the frame's trampoline:
perf's frame-pointer walk then sees py::callee directly inside py::caller,
with no eval-loop frame between them.  Recorded with real perf (`perf record
-g`, -X perf), a program whose phases each keep one shape hot:

  calls       top -> mid -> leaf, plain calls;
  generators  a consumer pulling from gen_outer, which yields from gen_inner;
  recursion   rec(40): deeper than the 16 records one loop holds, so the
              chain crosses eval-loop entries;
  after       the calls again, after the loop has raised through mid and
              top thousands of times (exceptions unwinding through frames
              with records): a record left behind would show a frame that
              is not there, one dropped too early would hide one.
  signals     a Python signal handler (SIGALRM, 2 ms after the last one
              ended) that runs handler_work -> leaf on top of sig_top ->
              sig_mid -> spin, which the eval loop interrupts between two
              instructions of spin, a frame shown by its record: the
              handler's frames (a C call, through the trampoline, into a
              loop of their own) stand on that record, whose frames must
              all still be there.

Must hold, for the samples whose leaf Python frame is the phase's hot
function: at least 90% show the phase's whole Python chain, innermost first,
with no other Python frame inside it (the recursion: 41 py::rec frames below
py::recursion); in the calls and generator phases, at least 80% of those show
each Python frame directly inside the next (records, not a C call per
frame); in the recursion phase, an eval-loop frame at least every 16 py::rec
frames is allowed; between the signal handler and the frame it
interrupted, the C that runs the handler is allowed; where a generator is resumed from C whatever the
records, an eval-loop frame there is allowed too: in 3.11, which resumes
every generator from C (gen_send_ex()), between gen_inner and gen_outer and
between gen_outer and its consumer; in 3.13's free-threaded build, which
does not specialize FOR_ITER, between gen_outer and its consumer.
Exit 2 (cannot check) where the interpreter has no frame
records (not an x86-64 GCC frame-pointer build of the series, or LTO) and
where perf cannot record; fails where the build should have them (the
series' 3.13 or 3.11, x86-64, GCC, frame pointers, no LTO) and has not.
"""
import platform
import shutil
import sys
import sysconfig
import tempfile

from childcheck import (finish, frame_pointer_recording_unavailable, perf_record_failure, perf_record_program,
                        perf_script_samples, perf_script_text, recorded_program_failure)

CANNOT_CHECK = 2
MIN_WHOLE = 0.9
MIN_ADJACENT = 0.8
RECORDS_MAX = 16
# The gaps of the generator chain [leaf, gen_inner, gen_outer, generators] that are a C call whatever the
# records (a new eval loop, entered through the trampoline): 3.11 resumes every generator from C
# (gen_send_ex(), for `yield from` and for `for` alike); 3.13's free-threaded build does not specialize, so
# a `for` over a generator is FOR_ITER calling its tp_iternext, not FOR_ITER_GEN.
if sys.version_info[:2] == (3, 11):
    GENERATOR_C_RESUMPTIONS = {1, 2}
elif sys.version_info[:2] == (3, 13) and sysconfig.get_config_var("Py_GIL_DISABLED"):
    GENERATOR_C_RESUMPTIONS = {2}
else:
    GENERATOR_C_RESUMPTIONS = set()
DEPTH = 40

PROGRAM = r'''
import signal
import time

def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def mid(n):
    return leaf(n)

def top(n):
    return mid(n)

def calls():
    end = time.perf_counter() + 0.6
    while time.perf_counter() < end:
        top(2000)

def gen_inner(n):
    for i in range(n):
        yield leaf(200)

def gen_outer(n):
    yield from gen_inner(n)

def generators():
    end = time.perf_counter() + 0.6
    while time.perf_counter() < end:
        for _ in gen_outer(50):
            pass

def rec(d):
    if d == 0:
        return leaf(2000)
    return rec(d - 1)

def recursion():
    end = time.perf_counter() + 0.6
    while time.perf_counter() < end:
        rec(%(depth)d)

def boom(n):
    raise ValueError(n)

def mid_raising(n):
    return boom(n)

def top_raising(n):
    try:
        return mid_raising(n)
    except ValueError:
        return 0

def after():
    for i in range(20000):
        top_raising(i)
    end = time.perf_counter() + 0.6
    while time.perf_counter() < end:
        top(2000)

def handler_work():
    return leaf(40000)

armed = False

def on_alarm(signum, frame):
    handler_work()
    # one shot, armed again when the handler is done: an interval timer fires again while a slow machine
    # is still in the handler, which then runs nested on top of its own leaf (and recurses without end)
    if armed:
        signal.setitimer(signal.ITIMER_REAL, 0.002)

def spin(end):
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n

def sig_mid(end):
    return spin(end)

def sig_top(end):
    return sig_mid(end)

def signals():
    global armed
    sig_top(0)   # a code object's first call makes its trampoline (a C call); the loop records it after that
    signal.signal(signal.SIGALRM, on_alarm)
    armed = True
    signal.setitimer(signal.ITIMER_REAL, 0.002)
    try:
        sig_top(time.perf_counter() + 0.8)
    finally:
        armed = False   # first: a handler run after this does not arm the timer again
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

calls()
generators()
recursion()
after()
signals()
print("done")
''' % {"depth": DEPTH}

# phase: (hot leaf, its whole Python chain innermost first, up to the phase function)
PHASES = {
    "calls": ["leaf", "mid", "top", "calls"],
    "generators": ["leaf", "gen_inner", "gen_outer", "generators"],
    "recursion": ["leaf"] + ["rec"] * (DEPTH + 1) + ["recursion"],
    "after": ["leaf", "mid", "top", "after"],
    "signals": ["leaf", "handler_work", "on_alarm", "spin", "sig_mid", "sig_top", "signals"],
}
# Gaps of a phase's chain (between its frames i and i + 1) that are a C call whatever the records: the
# generator resumptions above, and the signal handler, called from C (the eval loop's pending calls) on
# top of the frame it interrupted
C_CALL_GAPS = {"generators": GENERATOR_C_RESUMPTIONS, "signals": {2}}


def records_built():
    return "-DPy_PERF_FRAME_RECORDS" in (sysconfig.get_config_var("CEVAL_FRAME_RECORDS_CFLAGS") or "")


def records_expected():
    """Whether configure should have chosen frame records for this build (the series' rule)."""
    if not hasattr(sys, "_stack_trampoline_backend") or sys.version_info[:2] not in ((3, 11), (3, 13)):
        return False
    if platform.machine() != "x86_64" or "GCC" not in sys.version:
        return False
    flags = " ".join(str(sysconfig.get_config_var(n) or "") for n in ("CFLAGS", "BASECFLAGS"))
    if "-fno-omit-frame-pointer" not in flags.split() or "-flto" in (sysconfig.get_config_var("PY_CFLAGS") or ""):
        return False
    return "--enable-experimental-jit" not in (sysconfig.get_config_var("CONFIG_ARGS") or "")


def analyse(samples):
    """{phase: (samples with the hot leaf inside it, with its whole chain, with adjacent Python frames)}."""
    counts = {phase: [0, 0, 0] for phase in PHASES}
    for _header, stack in samples:
        syms = [sym.split("+0x")[0] for _ip, sym in stack]
        py_at = [i for i, s in enumerate(syms) if s.startswith("py::")]
        names = [syms[i].split(":")[2] for i in py_at]
        phase = next((p for p in PHASES if p in names), None)
        if phase is None or not names or names[0] != "leaf":
            continue
        counts[phase][0] += 1
        chain = PHASES[phase]
        end = names.index(phase) + 1
        if names[:end] != chain:
            continue
        counts[phase][1] += 1
        gaps = [b - a - 1 for a, b in zip(py_at[:end], py_at[1:end])]
        if phase == "recursion":
            # one loop's records hold 16 frames: the next is a C call (trampoline and eval loop between)
            entries = [g for g in gaps if g]
            adjacent = len(entries) <= len(gaps) // RECORDS_MAX + 1 and all(g <= 3 for g in entries)
        else:
            allowed = C_CALL_GAPS.get(phase, set())
            adjacent = all(g == 0 for i, g in enumerate(gaps) if i not in allowed)
        counts[phase][2] += adjacent
    return counts


def main():
    if not records_built():
        if records_expected():
            print(f"this build should have perf frame records (x86-64, GCC, frame pointers, no LTO) and has "
                  f"none: CEVAL_FRAME_RECORDS_CFLAGS={sysconfig.get_config_var('CEVAL_FRAME_RECORDS_CFLAGS')!r}")
            return 1
        print("cannot check: this interpreter has no perf frame records (CEVAL_FRAME_RECORDS_CFLAGS="
              f"{sysconfig.get_config_var('CEVAL_FRAME_RECORDS_CFLAGS')!r})")
        return CANNOT_CHECK
    why = frame_pointer_recording_unavailable()
    if why:
        print(f"cannot check: {why}")
        return CANNOT_CHECK
    workdir = tempfile.mkdtemp()
    try:
        rec, data = perf_record_program(workdir, "records.py", PROGRAM, ["-X", "perf"])
        crashed = recorded_program_failure(rec, data)
        if crashed:
            return finish([crashed])
        failed = perf_record_failure(rec, data)
        if failed:
            print(f"cannot check: {failed}")
            return CANNOT_CHECK
        if "done" not in rec.stdout:
            return finish([f"the program did not finish: {rec.stdout.strip()[-300:]} {rec.stderr.strip()[-600:]}"])
        counts = analyse(perf_script_samples(perf_script_text(data, "ip,sym")))
        problems = []
        for phase, (inside, whole, adjacent) in counts.items():
            print(f"{phase}: {inside} samples in py::leaf, {whole} with the whole chain, "
                  f"{adjacent} of them with each Python frame directly inside the next")
            if inside < 100:
                problems.append(f"{phase}: too few samples in py::leaf ({inside})")
                continue
            if whole < MIN_WHOLE * inside:
                problems.append(f"{phase}: only {whole} of {inside} samples show {' <- '.join(PHASES[phase][:6])}"
                                f"{' ...' if len(PHASES[phase]) > 6 else ''} whole (at least {MIN_WHOLE:.0%})")
            elif adjacent < MIN_ADJACENT * whole:
                problems.append(f"{phase}: only {adjacent} of {whole} whole chains show the Python frames "
                                f"without an eval-loop frame between them (at least {MIN_ADJACENT:.0%}): the "
                                "frames were entered by C calls, not frame records")
        return finish(problems)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
