# requires: perf
# checks: behaviour
"""An evaluator installed while a call is binding its arguments gets the frame of that call.

Under the trampoline the eval loop pushes a Python frame itself and then
enters it through the trampoline's evaluator.  Binding the arguments can run
Python code: a keyword given as a str subclass is compared to the parameter
names with its own __eq__.  Here that __eq__ installs another PEP 523
evaluator (_testinternalcapi.set_eval_frame_record()) in the middle of
CALL_FUNCTION_EX, after the instruction chose to push the frame.  Must hold:
the frame goes to the evaluator that is installed when it starts, so the
recorder sees `target` (and `after`, called next), and the interpreter does
not abort.  Entering every pushed frame through the trampoline's evaluator
regardless would run `target` without the recorder (a debug build stops on
an assertion).  Exit 2 (cannot check) where _testinternalcapi has no
set_eval_frame_record() (before 3.11, or a build without the test modules).
"""
import sys

from childcheck import finish

try:
    import _testinternalcapi
except ImportError:
    _testinternalcapi = None

CANNOT_CHECK = 2
frames = []


class Keyword(str):
    """A keyword name whose comparison installs the recorder, once."""

    installed = False

    def __eq__(self, other):
        if not Keyword.installed:
            Keyword.installed = True
            _testinternalcapi.set_eval_frame_record(frames)
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def target(value):
    return value + 1


def after(value):
    return value * 2


def call_through_keyword():
    kwargs = {Keyword("value"): 41}
    result = target(**kwargs)      # CALL_FUNCTION_EX: the frame is pushed, then bound
    return after(result)


def main():
    if _testinternalcapi is None or not hasattr(_testinternalcapi, "set_eval_frame_record"):
        print("cannot check: _testinternalcapi.set_eval_frame_record() is not available here")
        return CANNOT_CHECK
    for _ in range(3):
        target(value=1), after(1)      # warm: specialized without any evaluator
    sys.activate_stack_trampoline("perf")
    try:
        result = call_through_keyword()
    finally:
        _testinternalcapi.set_eval_frame_default()
        if sys.is_stack_trampoline_active():
            sys.deactivate_stack_trampoline()
    recorded = [name for name in frames if name != "set_eval_frame_default"]
    print(f"result {result}; installed during the call: {Keyword.installed}; recorded: {recorded}")
    if not Keyword.installed:
        print("cannot check: the keyword was never compared (argument binding found it by identity)")
        return CANNOT_CHECK
    problems = []
    if result != 84:
        problems.append(f"result {result}, expected 84")
    for name in ("target", "after"):
        if name not in recorded:
            problems.append(f"the recorder installed during the call never saw {name}()")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
