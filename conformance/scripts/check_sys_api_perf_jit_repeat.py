# requires: perf_jit
# hits: gh-141579 /exit 1, .*ValueError: invalid backend: perf_jit/
# hits: gh-146522 /perf_jit twice: exit -11\b/
# checks: behaviour
"""sys API with the perf_jit backend as upstream's newer tests use it, and activating it again.

Upstream's test_sys_api_perf_jit_backend: sys.activate_stack_trampoline
("perf_jit") makes sys.is_stack_trampoline_active() True, deactivation makes
it False, and the program exits 0.  test_sys_api_with_existing_perf_jit_
trampoline: activating "perf_jit" twice in a row exits 0.  Both programs
must print nothing on stderr.  This check runs those, and the same program
under -X perf_jit (the backend active from start-up, then activated again
through the API), and asks of each jitdump what a profile needs:
  * it is mapped executable while the process runs (the marker perf inject
    --jit looks for);
  * exactly one header, every record's size adds up to the file size;
  * a code load for each function called after each activation, and none for
    the function called while the trampoline was off.
(check_fix_perf_jit_sys_api.py is gh-141579's reproducer; this one covers
upstream's newer tests of the same API.)
"""
import json
import os
import struct
import subprocess
import sys

MAGIC = 0x4A695444

PROGRAM = r'''
import json, os, sys
def maps_dump():
    name = "/tmp/jit-%d.dump" % os.getpid()
    with open("/proc/self/maps") as maps:   # closed: a debug build warns of an unclosed file on stderr
        return any(l.endswith(name) and "x" in l.split()[1] for l in maps.read().splitlines())
def first_call():
    return 1
def second_call():
    return 2
def while_off():
    return 3
out = {"pid": os.getpid(), "active_at_start": sys.is_stack_trampoline_active()}
sys.activate_stack_trampoline("perf_jit")
out["active_1"] = sys.is_stack_trampoline_active()
first_call()
sys.activate_stack_trampoline("perf_jit")
out["active_2"] = sys.is_stack_trampoline_active()
second_call()
out["mapped"] = maps_dump()
sys.deactivate_stack_trampoline()
out["active_after"] = sys.is_stack_trampoline_active()
while_off()
print(json.dumps(out))
'''


def parse(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 40:
        return None, f"{len(data)} bytes"
    magic, _version, hdr = struct.unpack_from("<III", data, 0)
    if magic != MAGIC:
        return None, f"magic {magic:#x}"
    pos, names = hdr, []
    while pos < len(data):
        if pos + 16 > len(data):
            return names, f"truncated record header at {pos}"
        rid, size = struct.unpack_from("<II", data, pos)
        if rid == MAGIC:
            return names, f"a second header at offset {pos}"
        if size < 16 or pos + size > len(data):
            return names, f"record id {rid:#x} with size {size} at offset {pos}"
        if rid == 0:
            end = data.index(b"\0", pos + 56)
            names.append(data[pos + 56:end].decode("utf-8", "replace"))
        pos += size
    return names, None


def run(label, argv):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    res = json.loads(lines[-1]) if lines else {}
    problems = []
    if proc.returncode != 0 or not res:
        return [f"{label}: exit {proc.returncode}, stderr {proc.stderr.strip()[-1000:]!r}"]
    if proc.stderr.strip():
        problems.append(f"{label}: stderr not empty: {proc.stderr.strip()[-600:]!r}")
    for key, want in (("active_1", True), ("active_2", True), ("active_after", False)):
        if res.get(key) is not want:
            problems.append(f"{label}: sys.is_stack_trampoline_active() was {res.get(key)} at {key} (want {want})")
    if not res.get("mapped"):
        problems.append(f"{label}: /tmp/jit-{res['pid']}.dump is not mapped executable while the process runs")
    path = f"/tmp/jit-{res['pid']}.dump"
    if not os.path.exists(path):
        problems.append(f"{label}: no {path}")
    else:
        names, err = parse(path)
        os.unlink(path)
        if err:
            problems.append(f"{label}: {path}: {err}")
        for want in ("first_call", "second_call"):
            if not any(f"py::{want}:" in n for n in names or []):
                problems.append(f"{label}: no code load for py::{want} in {path}")
        if any("py::while_off:" in n for n in names or []):
            problems.append(f"{label}: py::while_off ran with the trampoline off but has a code load")
    print(f"{label}: {res}")
    return problems


def main():
    upstream_backend = """if 1:
        import sys
        sys.activate_stack_trampoline("perf_jit")
        assert sys.is_stack_trampoline_active() is True
        sys.deactivate_stack_trampoline()
        assert sys.is_stack_trampoline_active() is False
        """
    upstream_twice = """if 1:
        import sys
        sys.activate_stack_trampoline("perf_jit")
        sys.activate_stack_trampoline("perf_jit")
        """
    problems = []
    for label, code in (("test_sys_api_perf_jit_backend", upstream_backend),
                        ("test_sys_api_with_existing_perf_jit_trampoline", upstream_twice)):
        proc = subprocess.run([sys.executable, "-c", code + "\nimport os\nprint(os.getpid())\n"],
                              capture_output=True, text=True, timeout=300)
        pid = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else None
        if pid and os.path.exists(f"/tmp/jit-{pid}.dump"):
            os.unlink(f"/tmp/jit-{pid}.dump")
        if proc.returncode != 0 or proc.stderr.strip():
            problems.append(f"{label}: exit {proc.returncode}, stderr {proc.stderr.strip()[-800:]!r}")
        print(f"{label}: exit {proc.returncode}")
    problems += run("sys API, perf_jit twice", [sys.executable, "-c", PROGRAM])
    problems += run("-X perf_jit, then sys API perf_jit twice", [sys.executable, "-X", "perf_jit", "-c", PROGRAM])
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("OK: perf_jit through the sys API, activated again, and after -X perf_jit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
