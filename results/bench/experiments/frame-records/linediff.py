"""linediff.py: per source line executed instructions (run2 - run1) per unit in FN, for two builds; lines matched by text."""
import sys, subprocess, re
sys.path.insert(0, "/w/bench")
from cginstr import parse
from collections import defaultdict
def per_line(tag, binary, src, fn, units):
    a, b = parse(f"/w/out/{tag}-1.cg"), parse(f"/w/out/{tag}-2.cg")
    cnt = defaultdict(float)
    for (f, ad), v in b.items():
        if (f or "") == fn: cnt[ad] += v
    for (f, ad), v in a.items():
        if (f or "") == fn: cnt[ad] -= v
    nm = {l.split()[2]: int(l.split()[0], 16) for l in subprocess.run(["nm", binary], capture_output=True, text=True).stdout.splitlines() if len(l.split()) == 3}
    start = nm[fn]
    dis = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", binary, f"--start-address={start}", f"--stop-address={start+0x30000}"], capture_output=True, text=True).stdout
    lines = open(src).read().split("\n")
    addr_line = {}; cur = None; base = min(cnt) if cnt else 0
    for l in dis.splitlines():
        m = re.match(r"^/.*/(\S+):(\d+)", l)
        if m: cur = (m.group(1), int(m.group(2))); continue
        m = re.match(r"^\s+([0-9a-f]+):", l)
        if m: addr_line[int(m.group(1), 16)] = cur
    # callgrind addresses are runtime; PIE bias = runtime - link
    bias = min(cnt) - start if cnt else 0
    print("bias", hex(bias), hex(min(cnt)), hex(start), file=sys.stderr)
    out = defaultdict(float)
    for ad, v in cnt.items():
        fl = addr_line.get(ad - bias)
        key = lines[fl[1]-1].strip() if fl and fl[0] == "ceval.c" else str(fl)
        out[key] += v / units
    return out
n = per_line("nr3-call-off", "/w/b-norec/python", "/w/b-norec/../Python-3.11.2/Python/ceval.c.v2", "_PyEval_EvalFrameDefault", 200000)
r = per_line("rec2-call-off", "/w/b-rec/python", "/w/b-rec/../Python-3.11.2/Python/ceval.c.v2", "_PyEval_EvalFrameDefault", 200000)
print("total", sum(n.values()), sum(r.values()))
for k in sorted(set(n) | set(r), key=lambda k: r.get(k, 0) - n.get(k, 0)):
    d = r.get(k, 0) - n.get(k, 0)
    if abs(d) > 0.4: print(f"{d:+7.2f} {n.get(k,0):7.2f} {r.get(k,0):7.2f}  {k[:100]}")
