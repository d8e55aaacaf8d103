#!/usr/bin/env python3
# requires: perf_jit
# fixes: gh-141579
"""Reproducer check for gh-141579: sys.activate_stack_trampoline("perf_jit").

In CPython 3.13.5 the "perf_jit" branch of sys.activate_stack_trampoline()
is unreachable, so the call raises "ValueError: invalid backend: perf_jit"
although "-X perf_jit" works.

The check runs a child interpreter (the same one that runs this script) which
activates the backend through the sys API, calls a uniquely named function,
and deactivates the trampoline (which closes the jitdump). It then parses
/tmp/jit-<child pid>.dump and requires a JIT_CODE_LOAD record for that
function.

Exit status: 0 = fixed, 1 = defect present (message on stderr),
2 = cannot be checked here (no perf trampoline support in this build).
Standard library only.
"""

import os
import struct
import subprocess
import sys
import sysconfig

JITDUMP_MAGIC = 0x4A695444
JIT_CODE_LOAD = 0
PROBE = "perf_jit_sys_api_probe"

CHILD = f"""
import os, sys
def {PROBE}():
    return sum(range(10))

try:
    sys.activate_stack_trampoline("perf_jit")
except ValueError as exc:
    print("ACTIVATE-FAILED", type(exc).__name__, exc, flush=True)
    sys.exit(3)
if not sys.is_stack_trampoline_active():
    print("NOT-ACTIVE", flush=True)
    sys.exit(4)
for _ in range(3):
    {PROBE}()
sys.deactivate_stack_trampoline()
print("PID", os.getpid(), flush=True)
"""


def fail(msg):
    print(f"FAIL (gh-141579): {msg}", file=sys.stderr)
    sys.exit(1)


def parse_code_loads(data):
    if len(data) < 40:
        raise ValueError(f"jitdump too short ({len(data)} bytes)")
    magic, _version, hdr_size = struct.unpack_from("<III", data, 0)
    if magic != JITDUMP_MAGIC:
        raise ValueError(f"bad jitdump magic {magic:#x}")
    off = hdr_size
    names = []
    while off + 16 <= len(data):
        rec_id, total = struct.unpack_from("<II", data, off)
        if total < 16 or off + total > len(data):
            break
        if rec_id == JIT_CODE_LOAD:
            # pid u32, tid u32, vma u64, code_addr u64, code_size u64, index u64
            name_off = off + 16 + 40
            end = data.index(b"\0", name_off)
            names.append(data[name_off:end].decode("utf-8", "replace"))
        off += total
    return names


def main():
    if sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") != 1:
        print("CANNOT CHECK: this interpreter has no perf trampoline support",
              file=sys.stderr)
        return 2
    proc = subprocess.run([sys.executable, "-c", CHILD],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout
    if "ACTIVATE-FAILED" in out:
        fail("sys.activate_stack_trampoline('perf_jit') raised: "
             + out.split("ACTIVATE-FAILED", 1)[1].strip())
    if proc.returncode != 0 or "PID" not in out:
        fail(f"child exited with {proc.returncode}; stdout={out!r} "
             f"stderr={proc.stderr[-2000:]!r}")
    pid = int(out.split("PID", 1)[1].split()[0])
    dump = f"/tmp/jit-{pid}.dump"
    try:
        try:
            with open(dump, "rb") as f:
                data = f.read()
        except OSError as exc:
            fail(f"activation succeeded but no jitdump was written: {exc}")
        try:
            names = parse_code_loads(data)
        except ValueError as exc:
            fail(f"{dump}: {exc}")
        probe = [n for n in names if n.startswith(f"py::{PROBE}:")]
        if not probe:
            fail(f"{dump} has {len(names)} code-load records but none for "
                 f"py::{PROBE}: (first names: {names[:5]})")
    finally:
        try:
            os.unlink(dump)
        except OSError:
            pass
    print(f"PASS (gh-141579): sys.activate_stack_trampoline('perf_jit') works;"
          f" {dump} had {len(names)} code-load records, incl. {probe[0]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
