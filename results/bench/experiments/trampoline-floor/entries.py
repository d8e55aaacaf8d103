"""entries.py FILE.cg...: calls of the trampoline's evaluator (py_trampoline_evaluator) and of the out-of-line
_PyEval_EvalFrame, by caller, from callgrind call-graph outputs.  In 3.11-fp the eval loop enters a frame it
pushed (patch 0006's enter_frame_through_hook) through _PyEval_EvalFrame: those are the frames that run inline
without the trampoline; every other caller (gen_send_ex2 in PyGen_am_send / gen_iternext, _PyEval_Vector, ...)
is a C entry with or without it."""
import re, sys
from collections import defaultdict
WATCH = ("py_trampoline_evaluator", "_PyEval_EvalFrame")
for path in sys.argv[1:]:
    names = {}; fn = None; cfn = None; calls = defaultdict(int)
    def name(tok):
        m = re.match(r"\((\d+)\)(?: (.*))?", tok)
        if not m: return tok
        if m.group(2) is not None: names[m.group(1)] = m.group(2)
        return names.get(m.group(1), tok)
    for raw in open(path):
        if raw.startswith("fn="): fn = name(raw[3:].strip())
        elif raw.startswith("cfn="): cfn = name(raw[4:].strip())
        elif raw.startswith("calls=") and re.sub(r"'\d+$", "", cfn or "") in WATCH:
            calls[(re.sub(r"'\d+$", "", fn), re.sub(r"'\d+$", "", cfn))] += int(raw.split()[0][6:])
    print(path)
    for (f, c), n in sorted(calls.items(), key=lambda x: -x[1]):
        print(f"  {n:12d}  {f} -> {c}")
