# requires: perf
# checks: behaviour
"""50,000 distinct code objects under -X perf: each present exactly once.

Needs many trampoline arenas; every entry must be well formed, every
function listed exactly once, and no two entries may share an address.
"""
import json
import os
import re
import subprocess
import sys

N = 50_000

CHILD = r'''
import json, os, sys
N = %d
CHUNK = 1000
total = 0
for start in range(0, N, CHUNK):
    src = "".join("def many_%%d(n):\n    return n + %%d\n" %% (i, i)
                  for i in range(start, start + CHUNK))
    ns = {}
    exec(compile(src, "many_codes.py", "exec"), ns)
    for i in range(start, start + CHUNK):
        total += ns["many_%%d" %% i](1)
print(json.dumps({"pid": os.getpid(), "total": total}))
''' % N

LINE = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) py::(.*):(.*)$")


def main():
    proc = subprocess.run([sys.executable, "-X", "perf", "-c", CHILD],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        print(f"FAIL: child exited {proc.returncode}: {proc.stderr[-2000:]}")
        return 1
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    expected_total = sum(i + 1 for i in range(N))
    if res["total"] != expected_total:
        print(f"FAIL: wrong results from the functions: {res['total']} != {expected_total}")
        return 1
    path = f"/tmp/perf-{res['pid']}.map"
    with open(path) as f:
        lines = f.read().splitlines()
    os.unlink(path)
    counts = {}
    addrs = set()
    for line in lines:
        m = LINE.match(line)
        if not m:
            print(f"FAIL: malformed line {line!r}")
            return 1
        addr = int(m.group(1), 16)
        if addr in addrs:
            print(f"FAIL: address {addr:#x} used twice")
            return 1
        addrs.add(addr)
        if m.group(4) == "many_codes.py":
            counts[m.group(3)] = counts.get(m.group(3), 0) + 1
    wrong = [(f"many_{i}", counts.get(f"many_{i}", 0)) for i in range(N)
             if counts.get(f"many_{i}", 0) != 1]
    if wrong:
        print(f"FAIL: {len(wrong)} of {N} functions not present exactly once, e.g. {wrong[:5]}")
        return 1
    print(f"OK: {N} distinct code objects, each exactly once; {len(lines)} lines, "
          f"all addresses distinct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
