"""instrdiff.py DIR TAG KIND MODE UNITS BINARY [HOOK]: per-instruction extra executions per unit in the eval loop and
HOOK (MODE minus off, each run 2 minus run 1), disassembled with source lines.  HOOK is the C function between the
eval loop and the trampoline: _PyPerf_EvalPushedFrame (3.13, the default) or py_trampoline_evaluator (3.11)."""
import re, subprocess, sys
from collections import defaultdict
sys.path.insert(0, __import__("os").path.dirname(__file__))
from cginstr import parse
d, tag, kind, mode, units, binary = sys.argv[1:7]
hook = sys.argv[7] if len(sys.argv) > 7 else "_PyPerf_EvalPushedFrame"
u = float(units)
def norm(f): return re.sub(r"'\d+$", "", f or "")
def per_addr(m):
    a, b = parse(f"{d}/{tag}-{kind}-{m}-1.cg"), parse(f"{d}/{tag}-{kind}-{m}-2.cg")
    out = defaultdict(float)
    for (f, ad), v in b.items(): out[(norm(f), ad)] += v
    for (f, ad), v in a.items(): out[(norm(f), ad)] -= v
    return out
off, on = per_addr("off"), per_addr(mode)
nm = {l.split()[2]: int(l.split()[0], 16) for l in subprocess.run(["nm", binary], capture_output=True, text=True).stdout.splitlines() if len(l.split()) == 3}
starts = [ad for (f, ad) in on if f == hook]
bias = min(starts) - nm[hook]
extra = defaultdict(float)
for k in set(off) | set(on):
    x = (on.get(k, 0) - off.get(k, 0)) / u
    if abs(x) > 0.02: extra[k] = x
dis = {}
for fn in ("_PyEval_EvalFrameDefault", hook):
    lo = nm[fn]
    txt = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", f"--start-address={lo}",
                          f"--stop-address={lo + 0x30000 if fn.startswith('_PyEval') else lo + 0x200}", binary],
                         capture_output=True, text=True).stdout
    src = ""
    for line in txt.splitlines():
        m = re.match(r"^(/\S+:\d+)", line) or re.match(r"^(\S+\.[ch]:\d+)", line)
        if m: src = m.group(1).split("/")[-1]; continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m: dis[int(m.group(1), 16)] = (src, m.group(2).strip())
tot = defaultdict(float)
for (f, ad), x in sorted(extra.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    tot[f] += x
    if f in ("_PyEval_EvalFrameDefault", hook):
        s, ins = dis.get(ad - bias, ("?", "?"))
        print(f"{f[:12]:12s} {ad - bias:8x} {x:+6.2f}  {s:32s} {ins}")
print({f: round(v, 2) for f, v in tot.items() if abs(v) > 0.1})
