# requires: perf
# checks: behaviour
"""A PEP 523 frame evaluator other than the trampoline sees every Python frame, with or without the trampoline.

The eval loop runs some Python frames itself, without calling the evaluator
(specialized calls, a Python __getitem__ reached by obj[i], from 3.12 an await
or a property): it may do so only while no evaluator is set, and under the
perf trampoline's own evaluator (which then runs each such frame through the
trampoline).  Another evaluator (a debugger's, a tracer's) must see them all.
_testinternalcapi.set_eval_frame_record() records the name of every frame it
is given.  The same warm code (its call sites specialized without any
evaluator) is run with the recorder alone, with the trampoline activated after
it (so running it), and with the recorder installed over an active
trampoline; must hold: the three record the same frames, and every function
the code runs is among them (__init__ aside: 3.13.5 runs it inline under
another evaluator once CALL_ALLOC_AND_ENTER_INIT is specialized; the 3.13
series' patch 0020 fixes that, and check_init_frames.py checks it).  3.11.2 ran a Python __getitem__ specialized
before an evaluator was set inline under it (the recorder alone missed it).
Exit 2 (cannot check) where _testinternalcapi has no set_eval_frame_record()
(before 3.11, or a build without the test modules).
"""
import sys

from childcheck import finish

try:
    import _testinternalcapi
except ImportError:
    _testinternalcapi = None

CANNOT_CHECK = 2
FUNCTIONS = {"prop", "__getitem__", "method", "inner", "recurse", "gen", "delegate", "leaf", "middle", "work"}


class Box:
    def __init__(self, v):
        self.v = v

    @property
    def prop(self):
        return self.v

    def __getitem__(self, i):
        return self.v + i

    def method(self, x):
        return x + 1


def gen(n):
    yield from range(n)


def delegate(n):
    return (yield from gen(n))


async def leaf(x):
    return x


async def middle(x):
    return await leaf(x)


def closure():
    y = 1

    def inner(z):
        return y + z
    return inner


def recurse(n):
    return n if n == 0 else recurse(n - 1)


def work():
    total = 0
    inner = closure()
    for i in range(20):
        box = Box(i)
        total += box.prop + box[1] + box.method(i) + inner(i) + recurse(3)
        total += sum(gen(3)) + sum(delegate(2))
        coro = middle(i)
        try:
            coro.send(None)
        except StopIteration as stop:
            total += stop.value
    return total


def record(how):
    frames = []
    if how == "trampoline under the recorder":
        _testinternalcapi.set_eval_frame_record(frames)
        try:
            sys.activate_stack_trampoline("perf")
        except RuntimeError as refused:
            # upstream 3.12-3.14 refuse to start under another evaluator (the series runs it)
            _testinternalcapi.set_eval_frame_default()
            return refused
    elif how == "recorder over the trampoline":
        sys.activate_stack_trampoline("perf")
        _testinternalcapi.set_eval_frame_record(frames)
    else:
        _testinternalcapi.set_eval_frame_record(frames)
    result = work()
    _testinternalcapi.set_eval_frame_default()
    if sys.is_stack_trampoline_active():
        sys.deactivate_stack_trampoline()
    return result, [name for name in frames if name not in ("record", "set_eval_frame_default")]


def main():
    if _testinternalcapi is None or not hasattr(_testinternalcapi, "set_eval_frame_record"):
        print("cannot check: _testinternalcapi.set_eval_frame_record() is not available here")
        return CANNOT_CHECK
    for _ in range(3):
        work()               # hot: its call sites specialized without any evaluator
    problems = []
    alone = record("recorder alone")
    for how, recorded in [("recorder alone", alone)] + [
            (how, record(how)) for how in ("trampoline under the recorder", "recorder over the trampoline")]:
        if isinstance(recorded, RuntimeError):
            print(f"{how}: not checked, this interpreter refuses it: {recorded}")
            continue
        result, frames = recorded
        missing = FUNCTIONS - set(frames)
        print(f"{how}: {len(frames)} frames recorded, result {result}"
              + (f"; never recorded: {sorted(missing)}" if missing else ""))
        if missing:
            problems.append(f"{how}: the evaluator never saw {sorted(missing)} (run without calling it)")
        if (result, frames) != alone:
            problems.append(f"{how}: {len(frames)} frames recorded, {len(alone[1])} with the recorder alone")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
