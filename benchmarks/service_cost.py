"""What each perf mode costs a long-running service: per process, per code object, and over a long run.

  python3 service_cost.py [N]     (in a cell's image: docker run --rm -v $PWD/benchmarks:/src IMAGE python3 /src/service_cost.py)

Prints one JSON line per measurement and mode (inactive, -X perf, -X perf_jit where offered):

- "process": a process that starts and exits (`-c pass`; then one that imports what a worker of a
  service typically does: json, asyncio, concurrent.futures, multiprocessing, logging): the bytes of the
  map or jitdump it leaves in /tmp, and its peak resident memory (VmHWM) beside the inactive run's.
- "live": N code objects made and kept (a service's own functions): the resident memory and file bytes
  each costs.
- "churn": N code objects made, called once and freed one after another (exec in a loop, templates,
  plugin reloads): resident memory (VmRSS) at the start and the end, the file at the end, per code object.

Each mode runs in a process of its own; the files it writes are removed at the end.
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import gc, json, os, sys
what, n = sys.argv[1], int(sys.argv[2])

def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

def files():
    pid = os.getpid()
    return sum(os.path.getsize(p) for p in ("/tmp/perf-%d.map" % pid, "/tmp/jit-%d.dump" % pid) if os.path.exists(p))

def make(i, tag):
    ns = {}
    exec(compile("def f_%s_%d(x):\n    return x + %d\n" % (tag, i, i), "<gen>", "exec"), ns)
    return ns["f_%s_%d" % (tag, i)]

out = {"pid": os.getpid()}
if what == "process":
    if n:
        import json, asyncio, concurrent.futures, multiprocessing, logging  # noqa: F401
elif what == "live":
    warm = [make(i, "warm") for i in range(1000)]
    for f in warm:
        f(1)
    r0, f0 = status("VmRSS"), files()
    kept = [make(i, "live") for i in range(n)]
    for f in kept:
        f(1)
    gc.collect()
    out.update(rss_per_code=(status("VmRSS") - r0) / n, file_per_code=(files() - f0) / n)
elif what == "churn":
    for i in range(1000):
        make(i, "warm")(1)
    gc.collect()
    r0 = status("VmRSS")
    out["rss_start"] = r0
    for i in range(n):
        make(i, "churn")(1)
    gc.collect()
    out.update(rss_end=status("VmRSS"), file_end=files(), rss_per_code=(status("VmRSS") - r0) / n,
               file_per_code=files() / n)
out["hwm"] = status("VmHWM")
out["files"] = files()
print(json.dumps(out))
'''


def run(args, what, n):
    proc = subprocess.run([sys.executable, *args, "-c", CHILD, what, str(n)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-300:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    pid = result.pop("pid")
    for path in ("/tmp/perf-%d.map" % pid, "/tmp/jit-%d.dump" % pid):
        if os.path.exists(path):
            os.unlink(path)
    return result


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400000
    modes = [("inactive", []), ("perf", ["-X", "perf"]), ("perf_jit", ["-X", "perf_jit"])]
    common = {"python": sys.version.split()[0]}
    for label, what, count in (("process: -c pass", "process", 0), ("process: a worker's imports", "process", 1),
                               ("live", "live", min(n, 100000)), ("churn", "churn", n)):
        for mode, args in modes:
            result = run(args, what, count)
            print(json.dumps({**common, "measure": label, "mode": mode,
                              **({"code_objects": count} if what != "process" else {}),
                              **{k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}}),
                  flush=True)


if __name__ == "__main__":
    main()
