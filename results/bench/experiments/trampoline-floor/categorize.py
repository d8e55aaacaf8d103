"""categorize.py INSTR_LISTING: sum an instrdiff.py listing of the 3.13-fp image binary into the parts of one
C-level entry.  Address ranges are those of cpython-perf:3.13-fp (9e9898ee6e59) /opt/cpython/bin/python3.13."""
import re, sys, ast
from collections import OrderedDict
R = [  # (part, [(lo, hi)]) in _PyEval_EvalFrameDefault / _PyPerf_EvalPushedFrame, inclusive
 ("eval loop prologue: 6 callee-saved pushes, mov %rsp,%rbp, sub rsp, spill tstate/frame (ceval.c:686)", [(0x24c2a0, 0x24c2bb)]),
 ("_Py_EnsureTstateNotNULL (test/je)", [(0x24c2c2, 0x24c2c5)]),
 ("entry_frame: fill 5 fields, link to tstate->current_frame (ceval.c:716-724)", [(0x24c2cb, 0x24c309), (0x24c313, 0x24c313), (0x24c31e, 0x24c31e)]),
 ("C recursion: c_recursion_remaining -= 1, _Py_EnterRecursiveCallTstate (pycore_ceval.h:306,321)", [(0x24c310, 0x24c310), (0x24c318, 0x24c31b), (0x24c322, 0x24c325)]),
 ("throwflag test (ceval.c:734)", [(0x24c32b, 0x24c32d)]),
 ("start_frame: _Py_EnterRecursivePy, next_instr, stack pointer (shared code path)", [(0x24c32f, 0x24c372)]),
 ("DISPATCH (ceval.c:786): the entry frame's INTERPRETER_EXIT, the caller's resumption", [(0x24c377, 0x24c390)]),
 ("INTERPRETER_EXIT: unlink entry_frame, c_recursion_remaining += 2 (generated_cases.c.h:3677-3688)", [(0x250670, 0x25069b), (0x24c928, 0x24c928)]),
 ("eval loop epilogue: add rsp, 6 pops, ret (ceval.c:1192)", [(0x24c92b, 0x24c93f)]),
 ("caller's label: call _PyPerf_EvalPushedFrame, test result, reload stack pointer, push, LOAD_IP, resume (ceval.c:968-1032)", [(0x24d287, 0x24d2c9), (0x256d1d, 0x256d6f), (0x25999d, 0x2599ac)]),
 ("instruction: test for the trampoline's evaluator, branch to the label", [(0x24edac, 0x24edb3), (0x253648, 0x25364f), (0x255ff6, 0x255ffd), (0x25a295, 0x25a299), (0x259aa0, 0x259aae)]),
 ("inline frame entry no longer taken (no-hook path of _PUSH_FRAME / SEND_GEN / FOR_ITER_GEN)", [(0x2574bf, 0x257514), (0x2575ef, 0x257605), (0x256095, 0x2560ed)]),
 ("_PyPerf_EvalPushedFrame: C stack check (patch 0028)", [(0x2f30c0, 0x2f30cc)]),
 ("_PyPerf_EvalPushedFrame: lookup, co_extra[index] and fast key", [(0x2f30d2, 0x2f3102)]),
 ("_PyPerf_EvalPushedFrame: tail call to the trampoline (load, evaluator, throwflag, jmp)", [(0x2f3130, 0x2f313c)]),
]


def classify(ranges, path):
    """The listing at path summed into the parts of ranges: (parts, instructions outside them, the per-function
    totals of its last line)."""
    parts = OrderedDict((name, 0.0) for name, _ in ranges)
    other = 0.0
    lines = open(path).read().splitlines()
    for line in lines[:-1]:
        f = line.split()
        addr, x = int(f[1], 16), float(f[2])
        for name, spans in ranges:
            if any(lo <= addr <= hi for lo, hi in spans):
                parts[name] += x; break
        else:
            other += x
    return parts, other, ast.literal_eval(lines[-1])


if __name__ == "__main__":
    parts, other, tot = classify(R, sys.argv[1])
    tramp = sum(v for k, v in tot.items() if k.startswith("0x"))
    parts["trampoline (JIT-written: push %rbp, mov %rsp,%rbp, call *%rcx, pop %rbp, ret)"] = tramp
    parts["other (eval loop, not classified)"] = other
    rest = sum(v for k, v in tot.items() if not k.startswith("0x") and k not in ("_PyEval_EvalFrameDefault", "_PyPerf_EvalPushedFrame"))
    parts["other functions"] = rest
    for k, v in parts.items():
        print(f"{v:7.2f}  {k}")
    print(f"{sum(parts.values()):7.2f}  TOTAL")
