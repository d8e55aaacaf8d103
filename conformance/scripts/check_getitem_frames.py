# requires: perf
# checks: behaviour
"""Every Python frame goes through the trampoline, including calls the
interpreter may inline (a Python __getitem__ reached by obj[i], which 3.11
specializes as BINARY_SUBSCR_GETITEM), also at call sites that were hot and
specialized before sys.activate_stack_trampoline() was called.

Checks that after activation the map has entries for __getitem__ (warm
site), a generator body and a method, and that they work.
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import json, os, sys

class Seq:
    def __getitem__(self, i):
        return i * 2

class Other:
    def __getitem__(self, i):
        return i + 1
    def method(self):
        return 3

def gen(n):
    for i in range(n):
        yield i

def warm(s, o):
    total = 0
    for i in range(2000):
        total += s[i] + o[i]
    return total

s, o = Seq(), Other()
before = warm(s, o)                     # specializes the subscripts
sys.activate_stack_trampoline("perf")
after = warm(s, o)                      # same, already specialized, sites
total = sum(gen(10)) + o.method()
sys.deactivate_stack_trampoline()
path = "/tmp/perf-%d.map" % os.getpid()
text = open(path).read()
os.unlink(path)
print(json.dumps({"ok": before == after and total == 48, "map": text}))
'''


def main():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0:
        print(f"FAIL: child exited {proc.returncode}: {proc.stderr}")
        return 1
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if not res["ok"]:
        print("FAIL: wrong results after activation")
        return 1
    names = ("Seq.__getitem__", "Other.__getitem__", "gen", "Other.method", "warm")
    if sys.version_info < (3, 11):
        # no co_qualname: the map names code by co_name (patches/3.9/README.md)
        names = ("__getitem__", "gen", "method", "warm")
    missing = [q for q in names if f" py::{q}:<string>\n" not in res["map"]]
    if sys.version_info < (3, 11) and res["map"].count(" py::__getitem__:<string>\n") < 2:
        missing.append("a second __getitem__ (Seq's and Other's)")
    if missing:
        print(f"FAIL: no trampoline (map entry) for {missing} after activation")
        return 1
    print("OK: __getitem__ at warm, specialized sites, generators and methods "
          "get trampolines after activation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
