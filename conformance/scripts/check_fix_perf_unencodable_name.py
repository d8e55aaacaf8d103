#!/usr/bin/env python3
# requires: perf perf_jit
# fixes: gh-156114
"""Reproducer check for gh-156114: code names that are not valid UTF-8.

In CPython 3.13.5, with the perf trampoline active, the first call of a code
object whose co_qualname (or co_filename) contains a lone surrogate makes the
trampoline's map writer fail in PyUnicode_AsUTF8() and leave the
UnicodeEncodeError set, so the call ends in
"SystemError: ... returned a result with an exception set".

The check runs child interpreters (the one running this script) with
"-X perf" and "-X perf_jit" that call such functions, including a generator
that has an exception thrown into its first frame (the pending exception must
survive), and requires a clean exit.

Exit status: 0 = fixed, 1 = defect present (message on stderr),
2 = cannot be checked here (no perf trampoline support in this build).
Standard library only.
"""

import os
import subprocess
import sys
import sysconfig

CHILD = r'''
import os, sys

def rename(code, name):
    # co_qualname exists from 3.11; before, the perf map names code by co_name
    if hasattr(code, "co_qualname"):
        return code.replace(co_name=name, co_qualname=name)
    return code.replace(co_name=name)

def f():
    return 42

f.__code__ = rename(f.__code__, "bad\udcff")
assert f() == 42, "bad-qualname call"

code = compile("x = 1", "bad\ud800file", "exec")
ns = {}
exec(code, ns)
assert ns["x"] == 1, "bad-filename exec"

def gen():
    yield 1
gen.__code__ = rename(gen.__code__, "g\ud800")
g = gen()
try:
    g.throw(ValueError("boom"))
except ValueError:
    pass
else:
    raise AssertionError("thrown exception was lost")
print("OK", os.getpid(), flush=True)
'''


def run(backend):
    proc = subprocess.run([sys.executable, f"-X{backend}", "-c", CHILD],
                          capture_output=True, text=True, timeout=120,
                          errors="backslashreplace")
    pid = None
    if proc.stdout.startswith("OK"):
        pid = proc.stdout.split()[1]
    for path in (f"/tmp/jit-{pid}.dump", f"/tmp/perf-{pid}.map"):
        if pid:
            try:
                os.unlink(path)
            except OSError:
                pass
    return proc


def main():
    if sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") != 1:
        print("CANNOT CHECK: this interpreter has no perf trampoline support",
              file=sys.stderr)
        return 2
    failures = []
    backends = ("perf", "perf_jit")   # '# requires: perf perf_jit': both are offered here
    for backend in backends:
        proc = run(backend)
        if proc.returncode != 0 or not proc.stdout.startswith("OK") \
                or proc.stderr.strip():
            last = proc.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
            failures.append(f"-X {backend}: exit {proc.returncode}: {last[0]}")
    if failures:
        for msg in failures:
            print(f"FAIL (gh-156114): {msg}", file=sys.stderr)
        return 1
    print("PASS (gh-156114): unencodable co_qualname/co_filename work under "
          + " and ".join(f"-X {b}" for b in backends)
          + "; pending exceptions are preserved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
