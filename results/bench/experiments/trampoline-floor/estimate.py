"""estimate.py CALLERS.txt: per suite benchmark, the frames the trampoline's evaluator enters in one loop (entries.py
counts minus nbody's, which are start-up: nbody's loop calls no Python function), split into type I (frames 3.11
runs inline without the trampoline: C entry + trampoline, 96.7 instructions each in `call`) and type II (C entries
either way: generator resumption, frames called from C: 31.1), the model's extra instructions against the suite's
measured extra (suite-20261128T142814Z, cachegrind, 3.11-fp -X perf vs inactive), and the ratio with each entry at
a given cost: V1 (type I 80.2, measured), and the floor (type I 65, type II 16, coroutine creation 6).  Each estimate
scales the measured extra by the modelled share, so entries outside the timed loop that the single run counts
cancel; generators' tree (200,001 tree() calls, 100,000 Tree.__init__) is built once before its timed loop and is
taken out of its counts."""
import re, sys, math
A = {"coroutines": (305468856, 315420579), "generators": (518702107, 573542334), "deltablue": (44506760, 49489600),
     "go": (1328857437, 1418338693), "json_dumps": (144099759, 145502554), "nbody": (1011071071, 1011071376),
     "raytrace": (3356819741, 3580040876), "richards": (563311392, 601258968)}
LOOPS = {"deltablue": 4}
cnt = {}; cur = None
for line in open(sys.argv[1]):
    m = re.match(r"/w/out/suite/(\w+)\.cg", line)
    if m: cur = m.group(1); cnt[cur] = {"I": 0, "II": 0}; continue
    n, caller, _, callee = line.split()
    if callee != "py_trampoline_evaluator": continue
    cnt[cur]["I" if caller == "_PyEval_EvalFrame" else "II"] += int(n)
base = cnt["nbody"]
COST = {"now": (96.7, 31.1, 10.5), "V1": (80.2, 31.1, 10.5), "floor": (65, 16, 6)}
logs = {k: 0.0 for k in COST}; logm = 0.0
print(f"{'benchmark':11s} {'type I':>9s} {'type II':>9s} {'model extra':>12s} {'measured':>12s} {'ratio':>7s} {'V1':>7s} {'floor':>7s}")
for b, (a, bb) in A.items():
    L = LOOPS.get(b, 1)
    nI = (cnt[b]["I"] - base["I"]) / L; nII = (cnt[b]["II"] - base["II"]) / L
    if b == "generators": nI -= 200001; nII -= 100000
    crea = nII if b == "coroutines" else 0      # each awaited coroutine is created inline (co_flags path)
    meas = bb - a
    out = {}
    model = nI * 96.7 + nII * 31.1 + crea * 10.5
    for k, (c1, c2, c3) in COST.items():
        out[k] = 1 + meas * (nI * c1 + nII * c2 + crea * c3) / model / a if model else 1.0
        logs[k] += math.log(out[k])
    logm += math.log(bb / a)
    print(f"{b:11s} {nI:9.0f} {nII:9.0f} {model:12,.0f} {meas:12,} {bb / a:7.4f} {out['V1']:7.4f} {out['floor']:7.4f}")
n = len(A)
print(f"geometric mean: measured {math.exp(logm / n):.4f}, model now {math.exp(logs['now'] / n):.4f}, "
      f"V1 {math.exp(logs['V1'] / n):.4f}, floor {math.exp(logs['floor'] / n):.4f}")
