# requires: perf_jit
# fixes: jitdump-fork-flush
"""Reproducer check: jitdumps of a process that forks, and of its child, stay whole.

CPython 3.13.5 (and upstream main, no upstream issue) writes the jitdump
through a 2 MiB stdio buffer flushed only at finalization
(patches/3.13/0006): after fork() the child finalizes the inherited backend
and fclose() flushes the parent's pending records into the parent's dump a
second time; and a child that ends with os._exit() never flushes, so its own
dump stays empty.  The parent here defines and runs 200 functions, forks a
child that runs child_only() and leaves with os._exit(0), then runs one more
function.  Each dump must be one header followed by whole records of known
ids whose sizes add up to the file size; the parent's holds after_fork once,
the child's holds child_only once.
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
    def child_only():
        return 1
    child_only()
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
    dumps = {}
    for who, pid in (("parent", parent), ("child", child)):
        path = f"/tmp/jit-{pid}.dump"
        if not os.path.exists(path):
            print(f"FAIL: the {who} wrote no {path}")
            return 1
        with open(path, "rb") as f:
            dumps[who] = f.read()
        os.unlink(path)
    failures = []
    for who, function in (("parent", b"py::after_fork:"), ("child", b"py::child_only:")):
        data = dumps[who]
        if len(data) < 40:
            failures.append(f"the {who}'s dump has {len(data)} bytes, not even a header")
            continue
        ids, problem = walk(data)
        if problem:
            failures.append(f"the {who}'s dump is corrupt: {problem}; "
                            f"{data.count(struct.pack('<I', MAGIC))} jitdump headers in {len(data)} bytes")
        elif data.count(function) != 1:
            failures.append(f"{function.decode()} appears {data.count(function)} times in the {who}'s dump")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: dumps intact across fork: parent {len(dumps['parent'])} bytes, "
          f"child (ended with os._exit) {len(dumps['child'])} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
