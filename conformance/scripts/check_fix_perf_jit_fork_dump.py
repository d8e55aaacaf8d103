# requires: perf_jit
# fixes: jitdump-fork-flush
"""Reproducer check: a forked child must not corrupt the parent's jitdump.

CPython 3.13.5 (and upstream main, no upstream issue) writes the jitdump
through a buffered stdio stream; after fork() the child finalizes the
inherited backend and fclose() flushes the parent's pending records into the
parent's /tmp/jit-PID.dump a second time (patches/3.13/0006).  The parent
here defines and runs 200 functions (their records sit in the buffer), forks
a child that exits at once, then runs one more function.  The parent's dump
must be one header followed by whole records of known ids whose sizes add up
to the file size, with the post-fork function exactly once.
"""
import os
import struct
import subprocess
import sys

CHILD = r'''
import os, sys
for i in range(200):
    exec(f"def f{i}(): return {i}")
    globals()[f"f{i}"]()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
def after_fork():
    return 0
after_fork()
print(os.getpid(), pid)
'''
MAGIC = 0x4A695444


def walk(data):
    """Record ids of a jitdump, or the problem that stops the walk."""
    magic, _version, header_size = struct.unpack_from("<III", data, 0)
    if magic != MAGIC:
        return None, f"bad magic {magic:#x}"
    offset, ids = header_size, []
    while offset < len(data):
        if offset + 8 > len(data):
            return ids, f"truncated record header at {offset}"
        record_id, size = struct.unpack_from("<II", data, offset)
        if record_id > 4 or size < 16:
            return ids, f"record id {record_id:#x}, size {size} at offset {offset} (a second header?)"
        ids.append(record_id)
        offset += size
    if offset != len(data):
        return ids, f"records end at {offset}, file has {len(data)} bytes"
    return ids, None


def main():
    proc = subprocess.run([sys.executable, "-X", "perf_jit", "-c", CHILD],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        print(f"FAIL: -X perf_jit child exited {proc.returncode}: {proc.stderr[-2000:]}")
        return 1
    parent, child = proc.stdout.split()
    for pid in (child,):
        path = f"/tmp/jit-{pid}.dump"
        if os.path.exists(path):
            os.unlink(path)
    path = f"/tmp/jit-{parent}.dump"
    if not os.path.exists(path):
        print(f"FAIL: no {path}")
        return 1
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    ids, problem = walk(data)
    if problem:
        print(f"FAIL: the parent's dump is corrupt after fork: {problem}; "
              f"{data.count(struct.pack('<I', MAGIC))} jitdump headers in {len(data)} bytes")
        return 1
    if data.count(b"py::after_fork:") != 1:
        print(f"FAIL: py::after_fork appears {data.count(b'py::after_fork:')} times in the parent's dump")
        return 1
    print(f"OK: parent's dump intact after fork: {ids.count(0)} code loads, "
          f"{ids.count(4)} unwinding records, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
