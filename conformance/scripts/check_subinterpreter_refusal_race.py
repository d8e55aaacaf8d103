# requires: perf perf_jit
# hits: patches/3.13/0014 /^the main interpreter started the subinterpreter's backend/
# hits: gh-141579 /^the subinterpreter's code failed: .*invalid backend: perf_jit/
# hits: patches/3.13/0014 /^Fatal Python error: PyMutex_Unlock: unlocking mutex that is not locked$/
# hits: patches/3.13/0014 /^Fatal Python error: (Segmentation fault|Bus error|Illegal instruction)$/
# checks: behaviour
"""A subinterpreter's refused activation changes nothing the main interpreter uses, even at the same moment.

The trampoline runs in the main interpreter only: sys.activate_stack_trampoline()
in a subinterpreter raises RuntimeError.  Which backend the next activation
starts is the process's, though.  A refusal that first selected the
subinterpreter's backend and put the old one back afterwards left a window in
which the main interpreter, activating at that moment in another thread, started
the subinterpreter's backend instead of its own.  Subinterpreters with a GIL of
their own (3.12+) run at the same time as the main interpreter, so the window
is real there.

A thread runs an isolated subinterpreter that asks for perf_jit again and again
(refused each time) while the main interpreter deactivates and activates
"perf" again and again.  Must hold: the main interpreter's trampoline never
ran the jitdump backend (no /tmp/jit-PID.dump appears), and every activation
it made succeeded.  Exit 2 where subinterpreters share one GIL (before 3.12)
or the interpreter cannot make an isolated one.
"""
import faulthandler
import os
import sys
import threading
import time

from childcheck import finish

CANNOT_CHECK = 2
MAIN_ACTIVATIONS = 30000     # the defect showed after 5,000-22,000
MAX_SECONDS = 60

SUB_CODE = '''
import os, sys
requests = 0
while not os.path.exists(STOP):
    for _ in range(200):
        requests += 1
        try:
            sys.activate_stack_trampoline("perf_jit")
        except RuntimeError:
            continue
        raise SystemExit(f"a subinterpreter's activation was not refused (request {requests})")
'''


def main():
    # where a subinterpreter's activation is accepted (no series), the subinterpreter's thread uses the
    # process's trampoline state while the main interpreter activates and deactivates it in another: the
    # process can die of SIGSEGV, which without faulthandler prints nothing the harness could name
    faulthandler.enable()
    try:
        import _interpreters as interpreters
    except ImportError:
        print("cannot check: subinterpreters with a GIL of their own need 3.12+ (_interpreters); before, a "
              "subinterpreter's refusal cannot run at the same moment as the main interpreter")
        return CANNOT_CHECK
    try:
        sub = interpreters.create(interpreters.new_config("isolated"))
    except Exception as exc:     # noqa: BLE001 - any refusal means this cannot be checked
        print(f"cannot check: no isolated subinterpreter: {exc}")
        return CANNOT_CHECK
    dump = f"/tmp/jit-{os.getpid()}.dump"
    stop = f"/tmp/refusal-race-{os.getpid()}.stop"
    if os.path.exists(dump):
        os.unlink(dump)
    failures = []

    def run_sub():
        try:
            result = interpreters.exec(sub, f"STOP = {stop!r}\n" + SUB_CODE)
            if result is not None:
                failures.append(f"the subinterpreter's code failed: {result!r}")
        except Exception as exc:  # noqa: BLE001
            failures.append(f"the subinterpreter failed: {exc!r}")

    thread = threading.Thread(target=run_sub)
    activations = 0
    problems = []
    deadline = time.monotonic() + MAX_SECONDS
    thread.start()
    try:
        while thread.is_alive() and activations < MAIN_ACTIVATIONS and time.monotonic() < deadline:
            try:
                sys.activate_stack_trampoline("perf")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"the main interpreter's activation {activations + 1} failed: {exc!r}")
                break
            activations += 1
            sys.deactivate_stack_trampoline()
            if os.path.exists(dump):
                break
    finally:
        with open(stop, "w"):
            pass
        thread.join()
        os.unlink(stop)
        if sys.is_stack_trampoline_active():
            sys.deactivate_stack_trampoline()
        interpreters.destroy(sub)
    print(f"{activations} activations in the main interpreter while a subinterpreter's were refused")
    problems += failures
    if os.path.exists(dump):
        problems.append(f"the main interpreter started the subinterpreter's backend: {dump} was made "
                        f"(after {activations} activations of perf)")
        os.unlink(dump)
    map_path = f"/tmp/perf-{os.getpid()}.map"
    if os.path.exists(map_path):
        os.unlink(map_path)
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
