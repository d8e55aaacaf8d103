# requires: perf_jit
# fixes: patches/3.13/0016
"""The jitdump backend reuses the trampoline slots of freed code objects, and perf names a reused slot by its new function.

A program that keeps creating code objects (exec, templates) would otherwise
keep a trampoline slot for each one it ever ran.  The jitdump's records are
timestamped, so `perf inject --jit` names an address after the code loaded
there last: a freed code object's slot can serve a new one.  The perf map has
no timestamps (a reused address would name two functions), so -X perf never
reuses a slot.

  files   500 functions made, called once and freed, one after another:
          under -X perf_jit the dump's code loads use at most 10 addresses
          for them; under -X perf the map names 500 addresses, each once.
  perf    recorded with real perf (dwarf, -k 1) and perf inject --jit:
          slot_first spins, is freed, and slot_second, made next, gets its
          slot (the dump says so) and spins.  Samples must name both, and
          every sample naming slot_first must come before every sample
          naming slot_second.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from childcheck import (child_reports, describe_exit, finish, jitdump_code_loads, perf_script_samples,
                        remove_perf_files)

CANNOT_CHECK = 2

CHURN = r'''
import gc, json, os, sys
for i in range(500):
    ns = {}
    exec(compile("def churn_%d(n):\n    return n + %d\n" % (i, i), "<churn>", "exec"), ns)
    ns["churn_%d" % i](1)
    del ns
    gc.collect()
print(json.dumps({"phase": "done", "pid": os.getpid()}), flush=True)
'''

SPIN = r'''
import gc, os, sys, time
def make(name):
    ns = {}
    exec(compile("def %s(seconds):\n    end = t() + seconds\n    n = 0\n    while t() < end:\n        n += 1\n"
                 "    return n\n" % name, "<%s>" % name, "exec"), ns)
    return ns[name]
import builtins
builtins.t = time.perf_counter
first = make("slot_first")
first(0.6)
del first
gc.collect()
second = make("slot_second")
second(0.6)
print("pid", os.getpid(), flush=True)
'''


def code_load_addresses(path):
    """{name: set of addresses} of the JIT_CODE_LOAD records of a jitdump."""
    import struct
    with open(path, "rb") as fh:
        data = fh.read()
    out, off = {}, 40
    while off + 16 <= len(data):
        rid, size, _ts = struct.unpack_from("<IIQ", data, off)
        if size < 16:
            break
        if rid == 0:
            vma = struct.unpack_from("<Q", data, off + 16 + 8)[0]
            end = data.find(b"\0", off + 16 + 40)
            name = data[off + 16 + 40:end].decode("utf-8", "replace")
            out.setdefault(name, set()).add(vma)
        off += size
    return out


def check_files():
    problems = []
    for mode in ("perf_jit", "perf"):
        proc = subprocess.run([sys.executable, "-X", mode, "-c", CHURN], capture_output=True, text=True, timeout=300)
        done = child_reports(proc.stdout).get("done")
        if proc.returncode != 0 or done is None:
            problems.append(f"{mode}: the interpreter ended with {describe_exit(proc.returncode)}: {proc.stderr[-400:]}")
            continue
        pid = done["pid"]
        try:
            if mode == "perf_jit":
                names, _count, problem = jitdump_code_loads(f"/tmp/jit-{pid}.dump")
                if problem:
                    problems.append(f"perf_jit: the dump is malformed: {problem}")
                loads = code_load_addresses(f"/tmp/jit-{pid}.dump")
                churn = {a for n, addrs in loads.items() if n.startswith("py::churn_") for a in addrs}
                print(f"perf_jit: 500 freed functions used {len(churn)} trampoline address(es)")
                if len([n for n in names if n.startswith("py::churn_")]) != 500:
                    problems.append("perf_jit: the dump does not name each of the 500 functions once")
                if not churn or len(churn) > 10:
                    problems.append(f"perf_jit: 500 functions, each freed before the next, used {len(churn)} "
                                    f"addresses: the slots of freed code objects are not reused")
            else:
                with open(f"/tmp/perf-{pid}.map") as fh:
                    entries = [line.split(" ", 2) for line in fh.read().splitlines()]
                churn = [(int(a, 16), n) for a, _s, n in entries if n.startswith("py::churn_")]
                addresses = {a for a, _n in churn}
                print(f"perf: 500 freed functions used {len(addresses)} map address(es)")
                if len(churn) != 500 or len(addresses) != 500:
                    problems.append(f"perf: the map names {len(churn)} churn functions at {len(addresses)} "
                                    f"addresses: a map address must never name a second function")
        finally:
            remove_perf_files(pid)
    return problems


def check_recording():
    if shutil.which("perf") is None:
        return None, "no perf here"
    workdir = tempfile.mkdtemp()
    try:
        prog = os.path.join(workdir, "spin.py")
        with open(prog, "w") as fh:
            fh.write(SPIN)
        data, injected = os.path.join(workdir, "perf.data"), os.path.join(workdir, "perf.jit.data")
        rec = subprocess.run(["perf", "record", "-F", "999", "-k", "1", "--call-graph", "dwarf,16384", "-o", data,
                              "--", sys.executable, "-X", "perf_jit", prog],
                             capture_output=True, text=True, timeout=300)
        found = re.search(r"pid (\d+)", rec.stdout)
        if rec.returncode != 0 or found is None:
            return None, f"perf record failed here ({rec.returncode}): {rec.stderr.strip()[-300:]}"
        pid = int(found.group(1))
        dump = f"/tmp/jit-{pid}.dump"
        loads = code_load_addresses(dump)
        first = loads.get("py::slot_first:<slot_first>", set())
        second = loads.get("py::slot_second:<slot_second>", set())
        problems = []
        if not first or first != second:
            problems.append(f"slot_second did not get slot_first's slot (dump: {sorted(map(hex, first))} vs "
                            f"{sorted(map(hex, second))})")
        inj = subprocess.run(["perf", "inject", "-i", data, "--jit", "-o", injected],
                             capture_output=True, text=True, timeout=300)
        if inj.returncode != 0:
            return None, f"perf inject --jit failed here: {inj.stderr.strip()[-300:]}"
        script = subprocess.run(["perf", "script", "-i", injected, "-F", "time,ip,sym"],
                                capture_output=True, text=True, timeout=300)
        times = {"first": [], "second": []}
        for header, stack in perf_script_samples(script.stdout):
            when = float(header.strip().rstrip(":"))
            if any(s.startswith("py::slot_first") for s in stack):
                times["first"].append(when)
            if any(s.startswith("py::slot_second") for s in stack):
                times["second"].append(when)
        print(f"perf: {len(times['first'])} samples name slot_first, {len(times['second'])} slot_second")
        if not times["first"] or not times["second"]:
            problems.append(f"perf named slot_first in {len(times['first'])} and slot_second in "
                            f"{len(times['second'])} samples: both spun 0.6 s in the same slot")
        elif max(times["first"]) >= min(times["second"]):
            late = sum(1 for t in times["first"] if t >= min(times["second"]))
            problems.append(f"{late} sample(s) named slot_first after slot_second took its slot")
        for name in os.listdir("/tmp"):
            if name.startswith(f"jitted-{pid}-") and name.endswith(".so"):
                os.unlink(os.path.join("/tmp", name))
        remove_perf_files(pid)
        return problems, None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    problems = check_files()
    recorded, why_not = check_recording()
    if recorded is None:
        print(f"perf part not run: {why_not}")
        if problems:
            return finish(problems)
        print(f"cannot check: {why_not}")
        return CANNOT_CHECK
    problems += recorded
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
