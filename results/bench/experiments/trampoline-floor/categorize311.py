"""categorize311.py INSTR_LISTING: sum an instrdiff.py listing of the 3.11-fp image binary (hook
py_trampoline_evaluator) into the parts of one frame entered.  Address ranges are those of cpython-perf:3.11-fp
(f244b7bbfed5) /opt/cpython/bin/python3.11."""
import sys

from categorize import classify
R = [  # (part, [(lo, hi)]), inclusive
 ("instruction: _PyPerf_EvalLoopMayPushFrame, evaluator == _PyPerf_TrampolineEvalFrame (ceval.c:4880)", [(0x26ffd2, 0x26ffdf)]),
 ("enter_frame_through_hook: co_flags test, generator/coroutine creation stays inline (ceval.c:5890)", [(0x26ed4e, 0x26ed58)]),
 ("enter_frame_through_hook: creation path, evaluator compare (ceval.c:5892)", [(0x26ed5a, 0x26ed6b)]),
 ("eval loop prologue: push rbp, mov, 5 pushes, sub $0x128 (ceval.c:1672)", [(0x266380, 0x26638d)]),
 ("_Py_EnsureTstateNotNULL (test/je)", [(0x266394, 0x266397)]),
 ("entry: _PyCFrame linked into tstate, use_tracing, is_entry, previous, eval_breaker (ceval.c:1688-1709)", [(0x26639d, 0x2663e1)]),
 ("throwflag test, call_shape.kwnames = NULL, start_frame reload (ceval.c:1695-1755)", [(0x2663e8, 0x2663fb)]),
 ("exit: RETURN_VALUE's is_entry path, restore tstate->cframe (ceval.c:5486-5490)", [(0x26afbb, 0x26afcf)]),
 ("eval loop epilogue: add rsp, 6 pops, ret (ceval.c:5909)", [(0x266b4f, 0x266b63)]),
 ("caller: enter_frame_through_hook's call, clear-and-pop call, result test, push, resume (ceval.c:5899-5906)", [(0x26ed71, 0x26eda8)]),
 ("caller: inline path not taken (frame link, RETURN_VALUE's unlink + inlined clear-and-pop + push)", [(0x26ba02, 0x26ba10), (0x26e27a, 0x26e2c1)]),
 ("evaluator: C stack check", [(0x2e5170, 0x2e517c)]),
 ("evaluator: mode test (prev_eval == NULL, status == OK)", [(0x2e517e, 0x2e5197)]),
 ("evaluator: lookup (f_code, co_extra, index, NULL/sign/bounds tests, entry)", [(0x2e5199, 0x2e51c2)]),
 ("evaluator: published-generation check (backend switching)", [(0x2e51c4, 0x2e51db)]),
 ("evaluator: tail call (load trampoline, lea _PyEval_EvalFrameDefault, jmp)", [(0x2e51dd, 0x2e51e7)]),
]
parts, other, tot = classify(R, sys.argv[1])
parts["trampoline (push %rbp, mov %rsp,%rbp, call *%rcx, pop %rbp, ret)"] = sum(v for k, v in tot.items() if k.startswith("0x"))
parts["other (eval loop, not classified)"] = other
for k, v in tot.items():
    if not k.startswith("0x") and k not in ("_PyEval_EvalFrameDefault", "py_trampoline_evaluator"):
        parts[f"function {k}"] = v
for k, v in parts.items():
    print(f"{v:7.2f}  {k}")
print(f"{sum(parts.values()):7.2f}  TOTAL")
