"""idiff.py TAG KIND MODE UNITS BINARY FN: per instruction of FN, MODE minus off (run2 - run1) per unit."""
import sys, subprocess, re
sys.path.insert(0, "/w/bench")
from cginstr import parse
from collections import defaultdict
tag, kind, mode, units, binary, fn = sys.argv[1:7]
u = float(units)
def per(m):
    a, b = parse(f"/w/out/{tag}-{kind}-{m}-1.cg"), parse(f"/w/out/{tag}-{kind}-{m}-2.cg")
    out = defaultdict(float)
    for (f, ad), v in b.items(): out[ad] += v
    for (f, ad), v in a.items(): out[ad] -= v
    return out, [ad for (f, ad) in b if (f or "").startswith(fn)]
off, s1 = per("off"); on, s2 = per(mode)
nm = {l.split()[2]: int(l.split()[0], 16) for l in subprocess.run(["nm", binary], capture_output=True, text=True).stdout.splitlines() if len(l.split()) == 3}
bias = min(s2) - nm[fn]
ex = {a - bias: (on.get(a,0)-off.get(a,0))/u for a in set(on)|set(off)}
ex = {a:x for a,x in ex.items() if abs(x)>0.3}
dis = subprocess.run(["objdump","-d","-l","--no-show-raw-insn",binary, "--start-address=%d" % nm[fn], "--stop-address=%d" % (nm[fn]+0x20000)], capture_output=True, text=True).stdout
src = ""
tot = 0
for line in dis.splitlines():
    m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
    if not m:
        if ":" in line and "/" in line: src = line.split("/")[-1]
        continue
    a = int(m.group(1), 16)
    if a in ex:
        tot += ex[a]
        print(f"{ex[a]:+5.1f} {m.group(1)} {m.group(2):50s} {src}")
print("total in fn", tot, " all", sum(ex.values()))
