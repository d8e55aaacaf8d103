# requires: perf
# checks: behaviour
"""Safety of /tmp/perf-PID.map: no symlink following, mode 0600, no fd leak.

1. A process plants a symlink /tmp/perf-<its own pid>.map -> a target file,
   then calls sys.activate_stack_trampoline("perf") and runs functions.
   The target must stay empty and the symlink must stay a symlink (the map is
   opened with O_NOFOLLOW); the process must keep working.  The activation
   may go on without a map (upstream) or be refused with an OSError naming
   the map and ELOOP (the fix series: a backend that cannot open its output
   refuses to start), and then the trampoline must be off.
2. A normal -X perf run creates the map with mode 0600 (even with umask 0).
3. The map's descriptor is close-on-exec: a program exec'd by a -X perf
   process (with close_fds=False) does not inherit it.
"""
import errno
import json
import os
import subprocess
import sys

SYMLINK_CHILD = r'''
import json, os, sys
target = sys.argv[1]
link = "/tmp/perf-%d.map" % os.getpid()
os.symlink(target, link)
refused = None
try:
    sys.activate_stack_trampoline("perf")
except OSError as exc:
    refused = [exc.errno, str(exc)]
def after_symlink(n):
    return n * 2
results = [after_symlink(i) for i in range(10)]
active = sys.is_stack_trampoline_active()
sys.deactivate_stack_trampoline()
print(json.dumps({"link": link, "ok": results == [i * 2 for i in range(10)],
                  "refused": refused, "active": active}))
'''

MODE_CHILD = r'''
import json, os, stat, subprocess, sys
def f():
    return 1
f()
path = "/tmp/perf-%d.map" % os.getpid()
mode = stat.S_IMODE(os.stat(path).st_mode)
# exec a program that lists the descriptors it inherited
out = subprocess.run([sys.executable, "-E", "-S", "-c",
    "import os\nfor fd in os.listdir('/proc/self/fd'):\n"
    "    try: print(os.readlink('/proc/self/fd/' + fd))\n"
    "    except OSError: pass"],
    close_fds=False, capture_output=True, text=True).stdout
print(json.dumps({"path": path, "mode": mode, "inherited": out.split()}))
'''


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    target = os.path.abspath("perfmap_symlink_target.txt")
    with open(target, "w"):
        pass
    try:
        proc = subprocess.run([sys.executable, "-c", SYMLINK_CHILD, target],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            fail(f"symlink child exited {proc.returncode}: {proc.stderr}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        is_link = os.path.islink(res["link"])
        if is_link:
            os.unlink(res["link"])
        size = os.path.getsize(target)
    finally:
        os.unlink(target)
    if not res["ok"]:
        fail("functions returned wrong results after the symlink was planted")
    if not is_link:
        fail("the planted symlink was replaced")
    if size != 0:
        fail(f"map entries were written through the symlink ({size} bytes in the target)")
    if res["refused"] is not None:
        err, text = res["refused"]
        if err != errno.ELOOP or "perf-" not in text:
            fail(f"activation refused with an unexpected error: {res['refused']}")
        if res["active"]:
            fail("activation was refused but is_stack_trampoline_active() says True")
        print(f"ok   activation refused: {text}")
    print("ok   planted symlink not followed, target untouched")

    old = os.umask(0)
    try:
        proc = subprocess.run([sys.executable, "-X", "perf", "-c", MODE_CHILD],
                              capture_output=True, text=True, timeout=120)
    finally:
        os.umask(old)
    if proc.returncode != 0:
        fail(f"mode child exited {proc.returncode}: {proc.stderr}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    os.unlink(res["path"])
    if res["mode"] != 0o600:
        fail(f"map file mode {oct(res['mode'])} with umask 0, expected 0o600")
    print("ok   mode 0600 with umask 0")
    leaked = [p for p in res["inherited"] if p.startswith("/tmp/perf-")]
    if leaked:
        fail(f"exec'd program inherited the map descriptor: {leaked}")
    print("ok   map descriptor is close-on-exec")
    print("OK: map file safety")
    return 0


if __name__ == "__main__":
    sys.exit(main())
