# requires: perf
# checks: behaviour
"""/tmp/perf-PID.map written under -X perf: format, content, flushing, mode.

Runs a child interpreter with -X perf that calls a few functions of its own
(a module-level function, a method, a nested function, a lambda), reads its
own map file *before exiting* (entries must be flushed as written), and
prints it.  Then checks:
  * every line is "<hex addr> <hex size> py::<qualname>:<filename>"
    (lower-case hex, no 0x prefix);
  * the script's functions are there with their qualname and the script's
    filename, and each of them exactly once;
  * addresses are distinct, sizes equal and non-zero;
  * the file has mode 0600.
Exit 0 on success, 1 with a message otherwise.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) py::(.*):(.*)$")

CHILD = r'''
import json, os, stat, sys

def top_level(n):
    return n + 1

class Klass:
    def method(self, n):
        def nested(m):
            return m * 2
        return nested(n)

square = lambda x: x * x

top_level(1); Klass().method(2); square(3)
path = "/tmp/perf-%d.map" % os.getpid()
with open(path) as f:
    text = f.read()
mode = stat.S_IMODE(os.stat(path).st_mode)
print(json.dumps({"path": path, "text": text, "mode": mode,
                  "file": __file__}))
'''


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as d:
        script = os.path.join(d, "perfmap_child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        proc = subprocess.run([sys.executable, "-X", "perf", script],
                              capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        fail(f"child exited {proc.returncode}: {proc.stderr}")
    try:
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception as exc:
        fail(f"cannot parse child output ({exc}): {proc.stdout!r}")
    os.unlink(res["path"])
    lines = res["text"].splitlines()
    if not lines:
        fail("map file is empty while the child was still running "
             "(entries not flushed as written?)")
    if not res["text"].endswith("\n"):
        fail("map file does not end with a newline (partial line)")
    entries = []
    for i, line in enumerate(lines, 1):
        m = LINE.match(line)
        if not m:
            fail(f"line {i} does not match '<hex> <hex> py::<qualname>:<file>': {line!r}")
        addr, size, qual, fname = m.groups()
        entries.append((int(addr, 16), int(size, 16), qual, fname))
    script_file = res["file"]
    if sys.version_info >= (3, 11):
        expected = ["top_level", "Klass.method", "Klass.method.<locals>.nested",
                    "<lambda>", "<module>"]
    else:
        # no co_qualname before 3.11: the map names code by co_name (patches/3.9/README.md)
        expected = ["top_level", "method", "nested", "<lambda>", "<module>"]
    for qual in expected:
        n = sum(1 for e in entries if e[2] == qual and e[3] == script_file)
        if n != 1:
            fail(f"expected exactly one entry 'py::{qual}:{script_file}', found {n}")
    addrs = [e[0] for e in entries]
    if len(set(addrs)) != len(addrs):
        fail("two entries share an address")
    sizes = {e[1] for e in entries}
    if len(sizes) != 1 or 0 in sizes:
        fail(f"trampoline sizes should be one non-zero value, got {sorted(sizes)}")
    if res["mode"] != 0o600:
        fail(f"map file mode is {oct(res['mode'])}, expected 0o600")
    print(f"OK: {len(entries)} well-formed lines, script functions present "
          f"once each, size {sizes.pop():#x}, mode 0600")
    return 0


if __name__ == "__main__":
    sys.exit(main())
