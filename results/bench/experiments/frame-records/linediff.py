"""linediff.py TAG_A BIN_A SRC_A FN_A TAG_B BIN_B SRC_B FN_B UNITS: what FN executes per unit (callgrind --dump-instr=yes, run 2 minus run 1 of each tag), source line by source line, lines matched by their text; e.g. linediff.py norec-call-off /w/b-norec/python ceval-a.c _PyEval_EvalFrameDefault rec2-call-off /w/b-rec/python ceval-b.c _PyEval_EvalFrameDefault 200000."""
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
    dis = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", binary, f"--start-address={start}", f"--stop-address={start+0x40000}"], capture_output=True, text=True).stdout
    lines = open(src).read().split("\n")
    addr_line = {}; cur = None
    for l in dis.splitlines():
        m = re.match(r"^/.*/(\S+):(\d+)", l)
        if m: cur = (m.group(1), int(m.group(2))); continue
        m = re.match(r"^\s+([0-9a-f]+):", l)
        if m: addr_line[int(m.group(1), 16)] = cur
    out = defaultdict(float)
    for ad, v in cnt.items():
        fl = addr_line.get(ad)
        key = lines[fl[1]-1].strip() if fl and fl[0] == "ceval.c" else str(fl)
        out[key] += v / units
    return out
a = per_line(*sys.argv[1:5], float(sys.argv[9])); b = per_line(*sys.argv[5:9], float(sys.argv[9]))
print("total", sum(a.values()), sum(b.values()))
for k in sorted(set(a) | set(b), key=lambda k: b.get(k, 0) - a.get(k, 0)):
    d = b.get(k, 0) - a.get(k, 0)
    if abs(d) > 0.4: print(f"{d:+7.2f} {a.get(k,0):7.2f} {b.get(k,0):7.2f}  {k[:100]}")
