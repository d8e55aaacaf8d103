# requires: perf
# hits: gh-156114 /surrogates not allowed.*SystemError: <function \w+ at 0x[0-9a-f]+> returned a result with an exception set/
# checks: behaviour
"""Code objects whose names are not valid UTF-8 under -X perf (gh-156114).

A function renamed with a lone surrogate, code compiled with such a
filename, and a generator with such a qualname that gets an exception
thrown into it: every call must return normally (no SystemError), the
thrown exception must arrive intact, nothing may be printed to stderr, and
the map must stay well formed, with one entry for the renamed function's
file.
"""
import os
import re
import subprocess
import sys
import tempfile

CHILD = r'''
import os, sys

def rename(code, name):
    # co_qualname exists from 3.11; before, the perf map names code by co_name
    if hasattr(code, "co_qualname"):
        return code.replace(co_name=name, co_qualname=name)
    return code.replace(co_name=name)

def foo():
    return 42

foo.__code__ = rename(foo.__code__, "bad\udcff")
assert foo() == 42

code = compile("x = 1", "bad\ud800file", "exec")
exec(code, {})

def gen():
    yield 1
gen.__code__ = rename(gen.__code__, "g\ud800")
g = gen()
try:
    g.throw(ValueError("boom"))
except ValueError as exc:
    assert str(exc) == "boom", exc
else:
    raise AssertionError("exception lost")

def good_after():
    return 7
assert good_after() == 7
print("ok", os.getpid())
'''

LINE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::(.*)$")


def main():
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as d:
        script = os.path.join(d, "badnames.py")
        with open(script, "w") as f:
            f.write(CHILD)
        proc = subprocess.run([sys.executable, "-X", "perf", script],
                              capture_output=True, timeout=120)
    out = proc.stdout.decode(errors="replace").split()
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0 or err or len(out) != 2 or out[0] != "ok":
        print(f"FAIL: exit {proc.returncode}, stdout {out!r}, stderr {err!r}")
        return 1
    path = f"/tmp/perf-{out[1]}.map"
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        print(f"FAIL: map file is not valid UTF-8: {exc}")
        return 1
    lines = text.splitlines()
    for line in lines:
        if not LINE.match(line):
            print(f"FAIL: malformed line {line!r}")
            return 1
    own = [l for l in lines if l.endswith(":" + script)]
    for needed in ("good_after", "<module>"):
        if not any(f" py::{needed}:" in l for l in own):
            print(f"FAIL: no entry for {needed}")
            return 1
    renamed = [l for l in own if " py::good_after:" not in l and " py::<module>:" not in l
               and " py::gen:" not in l]
    if len(renamed) < 2:
        print(f"FAIL: expected entries for the renamed function and generator: {own}")
        return 1
    print("OK: calls returned normally; entries written as: "
          + "; ".join(l.split(" ", 2)[2] for l in renamed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
