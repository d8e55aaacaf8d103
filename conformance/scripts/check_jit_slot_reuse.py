# requires: perf_jit
# fixes: patches/3.13/0019
# records: perf
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
  perf    recorded with real perf (dwarf, -k 1) and perf inject --jit: six
          functions spin one after another, each freed before the next is
          made, so slots are handed out again.  Every py::spin_N frame of
          every sample must be the code the dump loaded last, before the
          sample, at that frame's address; and at least one sampled frame
          must be in a slot that an earlier, freed code object had.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from childcheck import (PERF_DWARF_STACK, PERF_EVENT, child_reports, describe_exit, finish, jitdump_code_loads,
                        perf_script_samples, remove_perf_files)

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
import builtins, gc, os, sys, time
builtins.t = time.perf_counter
for i in range(6):
    ns = {}
    exec(compile("def spin_%d(seconds):\n    end = t() + seconds\n    n = 0\n    while t() < end:\n        n += 1\n"
                 "    return n\n" % i, "<spin>", "exec"), ns)
    ns["spin_%d" % i](0.25)
    del ns
    gc.collect()
print("pid", os.getpid(), flush=True)
'''


def code_loads(path):
    """The JIT_CODE_LOAD records of a jitdump: [(timestamp ns, address, code index, name)], in file order."""
    with open(path, "rb") as fh:
        data = fh.read()
    out, off = [], 40
    while off + 16 <= len(data):
        rid, size, stamp = struct.unpack_from("<IIQ", data, off)
        if size < 16:
            break
        if rid == 0:
            vma, _addr, _size, index = struct.unpack_from("<QQQQ", data, off + 16 + 8)
            end = data.find(b"\0", off + 16 + 40)
            out.append((stamp, vma, index, data[off + 16 + 40:end].decode("utf-8", "replace")))
        off += size
    return out


def code_load_addresses(path):
    """{name: set of addresses} of the JIT_CODE_LOAD records of a jitdump."""
    out = {}
    for _stamp, vma, _size, name in code_loads(path):
        out.setdefault(name, set()).add(vma)
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
        rec = subprocess.run(["perf", "record", *PERF_EVENT, "-F", "999", "-k", "1", "--call-graph", f"dwarf,{PERF_DWARF_STACK}", "-o", data,
                              "--", sys.executable, "-X", "perf_jit", prog],
                             capture_output=True, text=True, timeout=300)
        found = re.search(r"pid (\d+)", rec.stdout)
        if rec.returncode != 0 or found is None:
            return None, f"perf record failed here ({rec.returncode}): {rec.stderr.strip()[-300:]}"
        pid = int(found.group(1))
        loads = code_loads(f"/tmp/jit-{pid}.dump")
        problems = []
        inj = subprocess.run(["perf", "inject", "-i", data, "--jit", "-o", injected],
                             capture_output=True, text=True, timeout=300)
        if inj.returncode != 0:
            return None, f"perf inject --jit failed here: {inj.stderr.strip()[-300:]}"
        script = subprocess.run(["perf", "script", "-i", injected, "-F", "time,ip,sym,dso"],
                                capture_output=True, text=True, timeout=300)
        # perf inject makes one DSO per code load, jitted-PID-INDEX.so: a frame's DSO names the load perf
        # chose for its address at that time; it must be the newest load there at the sample's time
        by_index = {index: (stamp, vma, name) for stamp, vma, index, name in loads}
        checked, in_reused, wrong = 0, 0, []
        for header, frames in perf_script_samples(script.stdout):
            when = float(header.strip().rstrip(":")) * 1e9
            for _ip, rest in frames:
                m = re.fullmatch(r"(py::spin_\S*) \(\S*jitted-\d+-(\d+)\.so\)", rest)
                if m is None or int(m.group(2)) not in by_index:
                    continue
                stamp, vma, name = by_index[int(m.group(2))]
                at_vma = [(s, n) for s, v, _i, n in loads if v == vma]
                newer = [n for s, n in at_vma if stamp < s <= when]
                checked += 1
                if any(s < stamp and n != name for s, n in at_vma):
                    in_reused += 1
                if newer or not m.group(1).startswith(name):
                    wrong.append(f"{m.group(1)} at {vma:#x}: perf used the load of {name}, but "
                                 f"{newer[-1] if newer else name} was loaded there last")
        print(f"perf: {checked} py::spin_ frames checked, {in_reused} in a slot an earlier freed code object had, "
              f"{len(wrong)} named wrong")
        if wrong:
            problems.append(f"{len(wrong)} frame(s) named after a code object other than the one loaded last "
                            f"at their address, e.g. {wrong[0]}")
        if in_reused == 0:
            problems.append("no sampled py::spin_ frame was in a reused slot: the recording did not show reuse")
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
