# requires: perf
# fixes: patches/3.13/0014
"""The trampoline and subinterpreters: no crash, no co_extra index exhaustion, a truthful is_stack_trampoline_active().

co_extra indices belong to one interpreter each, and another tool may own
an index in one interpreter that the trampoline holds in another (pydevd's
frame evaluator does; ctypes stands in for it here).  The trampoline runs in
the main interpreter only: sys.activate_stack_trampoline() in a
subinterpreter raises RuntimeError saying so, sys.is_stack_trampoline_active()
answers False there, and the main interpreter's trampoline keeps working.

  A. a subinterpreter whose tool owns co_extra index 0 (with data that is not
     a trampoline entry) tries to activate first, then the main interpreter
     activates, then the subinterpreter calls its function;
  B. the main interpreter activates first, then the subinterpreter (tool at
     index 0) tries to activate and calls its function;
  C. 300 rounds of: main activates, a subinterpreter tries, main
     deactivates, the subinterpreter is destroyed; no index runs out and
     every answer of is_stack_trampoline_active() is the truth.
Each case runs in a child interpreter that must exit 0 (never by a signal),
and the main interpreter's map must name the function it called.
"""
import json
import os
import subprocess
import sys

from childcheck import CO_EXTRA_TOOL, child_reports, describe_exit, finish, remove_perf_files

PRELUDE = r'''
import json, os, sys
try:
    import _interpreters as interpreters          # 3.13+
except ImportError:
    try:
        import _xxsubinterpreters as interpreters  # 3.8 - 3.12
    except ImportError:
        print(json.dumps({"phase": "cannot", "why": "no subinterpreter module"}))
        sys.exit(0)

def create():
    new_config = getattr(interpreters, "new_config", None)
    if new_config is not None:
        # the legacy configuration (shared GIL) lets ctypes import there
        return interpreters.create(new_config("legacy"))
    return interpreters.create()

def run(interp, code):
    runner = getattr(interpreters, "run_string", None) or getattr(interpreters, "exec")
    result = runner(interp, code)
    if result is not None:                        # 3.13's exec() returns the exception info
        raise RuntimeError("the subinterpreter's code failed: %r" % (result,))

def report(phase, **facts):
    print(json.dumps(dict(phase=phase, **facts)), flush=True)
'''

# Run in a subinterpreter: take a co_extra index of its own (as a debugger's frame
# evaluator does) and store data there that is not a perf trampoline entry.
SUB_TOOL = CO_EXTRA_TOOL + r'''
tool_index = request(None)

def sub_function(n):
    return n + 1

for index in range(tool_index + 1):
    # the tool's data, at every index this interpreter has handed out
    set_extra(sub_function.__code__, index, 0x10)
'''

SUB_TRY_ACTIVATE = r'''
import json, sys
try:
    sys.activate_stack_trampoline("perf")
except RuntimeError as exc:
    outcome = "refused: " + str(exc)
else:
    outcome = "activated"
print(json.dumps({"phase": "sub_activate", "outcome": outcome,
                  "active_in_sub": sys.is_stack_trampoline_active()}), flush=True)
'''

SUB_CALL = r'''
import json, sys
total = sum(sub_function(i) for i in range(1000))
print(json.dumps({"phase": "sub_call", "total": total,
                  "active_in_sub": sys.is_stack_trampoline_active()}), flush=True)
'''

CASE_A = PRELUDE + r'''
sub = create()
run(sub, SUB_TOOL)
run(sub, SUB_TRY_ACTIVATE)
sys.activate_stack_trampoline("perf")
def main_function_a(n):
    return n * 2
main_function_a(3)
report("main", active=sys.is_stack_trampoline_active(), pid=os.getpid())
run(sub, SUB_CALL)
interpreters.destroy(sub)
report("done")
'''

CASE_B = PRELUDE + r'''
sys.activate_stack_trampoline("perf")
def main_function_b(n):
    return n * 2
main_function_b(3)
sub = create()
run(sub, SUB_TOOL)
run(sub, SUB_TRY_ACTIVATE)
run(sub, SUB_CALL)
interpreters.destroy(sub)
main_function_b(4)
report("main", active=sys.is_stack_trampoline_active(), pid=os.getpid())
report("done")
'''

CASE_C = PRELUDE + r'''
lies = []
for round_ in range(300):
    sys.activate_stack_trampoline("perf")
    if not sys.is_stack_trampoline_active():
        lies.append("main says inactive after activation in round %d" % round_)
    sub = create()
    run(sub, SUB_TRY_ACTIVATE)
    sys.deactivate_stack_trampoline()
    interpreters.destroy(sub)
    if sys.is_stack_trampoline_active():
        lies.append("main says active after deactivation in round %d" % round_)
sys.activate_stack_trampoline("perf")
def main_function_c(n):
    return n * 2
main_function_c(3)
report("main", active=sys.is_stack_trampoline_active(), pid=os.getpid(), lies=lies[:3])
report("done")
'''

CASES = {"A": (CASE_A, "main_function_a"), "B": (CASE_B, "main_function_b"), "C": (CASE_C, "main_function_c")}


def run_case(name, program, main_function):
    source = program.replace("SUB_TOOL", repr(SUB_TOOL)).replace("SUB_TRY_ACTIVATE", repr(SUB_TRY_ACTIVATE)) \
                    .replace("SUB_CALL", repr(SUB_CALL))
    proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=600)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    reports = child_reports(proc.stdout)
    problems = []
    if "cannot" in reports:
        return None, reports["cannot"]["why"]
    main = reports.get("main", {})
    remove_pid = main.get("pid")
    try:
        if proc.returncode != 0:
            problems.append(f"case {name}: the interpreter ended with {describe_exit(proc.returncode)}: "
                            f"{proc.stderr.strip()[-600:]}")
        for rec in lines:
            if rec.get("phase") == "sub_activate":
                if not rec["outcome"].startswith("refused") or "main interpreter" not in rec["outcome"]:
                    problems.append(f"case {name}: activation in a subinterpreter was not refused with a "
                                    f"RuntimeError naming the main interpreter: {rec['outcome']}")
                if rec["active_in_sub"]:
                    problems.append(f"case {name}: is_stack_trampoline_active() is True in the subinterpreter")
                break
        if "sub_call" in reports and reports["sub_call"]["active_in_sub"]:
            problems.append(f"case {name}: is_stack_trampoline_active() is True in the subinterpreter")
        if main:
            if not main.get("active"):
                problems.append(f"case {name}: the main interpreter's trampoline is not active after activation")
            for lie in main.get("lies", []):
                problems.append(f"case {name}: {lie}")
            path = f"/tmp/perf-{main['pid']}.map"
            names = open(path).read() if os.path.exists(path) else ""
            if f"py::{main_function}:" not in names:
                problems.append(f"case {name}: {path} does not name py::{main_function}")
        elif proc.returncode == 0:
            problems.append(f"case {name}: the main interpreter never reported")
        if proc.returncode == 0 and "done" not in reports:
            problems.append(f"case {name}: did not finish")
    finally:
        remove_perf_files(remove_pid)
    return problems, None


def main():
    problems = []
    for name, (program, function) in CASES.items():
        found, cannot = run_case(name, program, function)
        if cannot:
            print(f"cannot check: {cannot}")
            return 2
        problems += found
        print(f"case {name}: {'ok' if not found else 'FAILED'}")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
