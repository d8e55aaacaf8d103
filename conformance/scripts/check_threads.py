# requires: perf
# checks: behaviour
"""8 threads calling distinct functions at the same time under -X perf.

Each thread gets 200 functions of its own (distinct qualnames) and calls them
repeatedly, all threads released together by a barrier.  Every function must
appear exactly once in the map and every line must be well formed (no torn or
interleaved lines).
"""
import json
import re
import os
import subprocess
import sys

CHILD = r'''
import json, os, sys, threading
N_THREADS, N_FUNCS = 8, 200
funcs = []
for t in range(N_THREADS):
    ns = {}
    src = "".join("def thr%d_f%d(n):\n    return n + %d\n" % (t, i, i) for i in range(N_FUNCS))
    exec(compile(src, "threads_%d.py" % t, "exec"), ns)
    funcs.append([ns["thr%d_f%d" % (t, i)] for i in range(N_FUNCS)])
barrier = threading.Barrier(N_THREADS)
errors = []
def work(t):
    try:
        barrier.wait()
        for _ in range(20):
            for f in funcs[t]:
                f(1)
    except BaseException as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
for th in threads: th.start()
for th in threads: th.join()
print(json.dumps({"pid": os.getpid(), "errors": errors}))
'''

LINE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::(.*):(.*)$")


def main():
    proc = subprocess.run([sys.executable, "-X", "perf", "-c", CHILD],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"FAIL: child exited {proc.returncode}: {proc.stderr}")
        return 1
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    path = f"/tmp/perf-{res['pid']}.map"
    with open(path) as f:
        lines = f.read().splitlines()
    os.unlink(path)
    if res["errors"]:
        print("FAIL: threads raised:", res["errors"][:3])
        return 1
    counts = {}
    for line in lines:
        m = LINE.match(line)
        if not m:
            print(f"FAIL: malformed line {line!r}")
            return 1
        key = (m.group(1), m.group(2))
        counts[key] = counts.get(key, 0) + 1
    bad = []
    for t in range(8):
        for i in range(200):
            n = counts.get((f"thr{t}_f{i}", f"threads_{t}.py"), 0)
            if n != 1:
                bad.append(f"thr{t}_f{i}: {n}")
    if bad:
        print(f"FAIL: {len(bad)} functions not present exactly once: {bad[:10]}")
        return 1
    print(f"OK: 1600 functions from 8 concurrent threads, each exactly once ({len(lines)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
