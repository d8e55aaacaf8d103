"""What each new code object costs while a trampoline is active: memory that stays after it is freed, and file bytes.

  python3 code_object_cost.py [N]          (run it in a cell's image: docker run ... python3 /src/code_object_cost.py)

Creates N code objects (exec of a fresh function), calls each once, and
drops them, in three processes: no trampoline, -X perf, -X perf_jit (where
offered).  Prints one JSON line per mode: the growth of the process's
resident memory (VmRSS) and of the bytes malloc() holds (mallinfo2, via
ctypes) per code object after every one of them was freed, and the bytes
the map or the jitdump grew per code object.  A trampoline slot is never
reused after its code object is freed (the perf map has no timestamps, so a
reused address would name two functions), so this is what a program that
keeps creating code objects (exec, templates) pays for each one.
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import ctypes, gc, json, os, sys
n = int(sys.argv[1])

class mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = mallinfo2

def rss():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

def files():
    pid = os.getpid()
    return sum(os.path.getsize(p) for p in ("/tmp/perf-%d.map" % pid, "/tmp/jit-%d.dump" % pid) if os.path.exists(p))

def batch(count, tag):
    for i in range(count):
        ns = {}
        exec(compile("def f_%s_%d(x):\n    return x + %d\n" % (tag, i, i), "<gen>", "exec"), ns)
        ns["f_%s_%d" % (tag, i)](1)
    gc.collect()

batch(1000, "warm")
r0, m0, f0 = rss(), libc.mallinfo2().uordblks, files()
batch(n, "measured")
r1, m1, f1 = rss(), libc.mallinfo2().uordblks, files()
for p in ("/tmp/perf-%d.map" % os.getpid(), "/tmp/jit-%d.dump" % os.getpid()):
    if os.path.exists(p):
        os.unlink(p)
print(json.dumps({"rss_per_code": (r1 - r0) / n, "malloc_per_code": (m1 - m0) / n, "file_per_code": (f1 - f0) / n}))
'''


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    modes = [("inactive", []), ("perf", ["-X", "perf"]), ("perf_jit", ["-X", "perf_jit"])]
    for mode, args in modes:
        proc = subprocess.run([sys.executable, *args, "-c", CHILD, str(n)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(json.dumps({"mode": mode, "error": proc.stderr.strip()[-300:]}))
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps({"python": sys.version.split()[0], "mode": mode, "code_objects": n,
                          **{k: round(v, 1) for k, v in result.items()}}))


if __name__ == "__main__":
    main()
