# requires: perf
# checks: behaviour
"""fork() under -X perf: each process has its own map and keeps working.

The child interpreter (-X perf) forks from inside nested Python calls, so
both processes return through trampolines created before the fork
(gh-112367: the child must not unmap them).  After the fork each side
defines and calls functions of its own, and calls one function defined
before the fork.  Checks:
  * parent and child exit normally, the child's return value reaches the
    parent;
  * /tmp/perf-CHILDPID.map exists and holds the child's post-fork functions
    and none of the parent's; /tmp/perf-PARENTPID.map holds the parent's
    post-fork functions and none of the child's;
  * the child's map has an entry for the pre-fork function the child ran
    (so perf can name it in the child);
  * a second-generation fork works the same.
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import json, os, sys

def shared_before_fork(n):
    return n + 1

shared_before_fork(0)

def define(name):
    ns = {}
    exec("def %s(n):\n    return n * 3\n" % name, ns)
    return ns[name]

def fork_deep(depth, tag):
    if depth:
        return fork_deep(depth - 1, tag)
    pid = os.fork()
    if pid == 0:
        define("only_in_child_" + tag)(2)
        shared_before_fork(1)
        return 0
    return pid

def child_side(tag):
    # runs in the child after returning through the pre-fork frames
    for i in range(3):
        define("child_loop_%s_%d" % (tag, i))(i)
    if tag == "g1":
        pid = fork_deep(5, "g2")
        if pid == 0:
            child_side("g2")
            os._exit(0)
        print(json.dumps({"grandchild": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        result["grandchild"] = pid
        result["grandchild_status"] = status

result = {}
pid = fork_deep(10, "g1")
if pid == 0:
    child_side("g1")
    os._exit(0 if "grandchild_status" in result and result["grandchild_status"] == 0 else 3)
define("only_in_parent")(1)
_, status = os.waitpid(pid, 0)
print(json.dumps({"parent": os.getpid(), "child": pid, "status": status}))
'''


def read_map(pid):
    path = f"/tmp/perf-{pid}.map"
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read()
    os.unlink(path)
    return text


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def names(text):
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[2].startswith("py::"):
            out.append(parts[2][4:].rsplit(":", 1)[0] if ":" in parts[2][4:] else parts[2][4:])
    return out


def main():
    proc = subprocess.run([sys.executable, "-X", "perf", "-c", CHILD],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        fail(f"parent exited {proc.returncode}: {proc.stderr}")
    out = [json.loads(l) for l in proc.stdout.strip().splitlines()]
    res = out[-1]
    gc = [o["grandchild"] for o in out if "grandchild" in o]
    if len(gc) != 1:
        fail(f"grandchild pid not reported: {proc.stdout!r}")
    gc_map = read_map(gc[0])
    if res["status"] != 0:
        fail(f"child exited with status {res['status']:#x} (crash or failure after fork)")
    parent_map = read_map(res["parent"])
    child_map = read_map(res["child"])
    if gc_map is None:
        fail(f"grandchild map /tmp/perf-{gc[0]}.map missing")
    if parent_map is None:
        fail("parent map missing")
    if child_map is None:
        fail(f"child map /tmp/perf-{res['child']}.map missing")
    p, c, g = names(parent_map), names(child_map), names(gc_map)
    checks = [
        ("only_in_parent" in p, "parent map lacks only_in_parent"),
        ("only_in_child_g1" not in p, "parent map has the child's only_in_child_g1"),
        (not any(n.startswith("child_loop_") for n in p), "parent map has child functions"),
        ("only_in_child_g1" in c, "child map lacks only_in_child_g1"),
        (all(f"child_loop_g1_{i}" in c for i in range(3)), "child map lacks child_loop_g1_*"),
        ("only_in_parent" not in c, "child map has the parent's only_in_parent"),
        ("shared_before_fork" in c, "child map lacks the pre-fork function the child ran"),
        (not any(n.startswith("child_loop_g2") or n == "only_in_child_g2" for n in c),
         "child map has the grandchild's functions"),
        ("only_in_child_g2" in g and all(f"child_loop_g2_{i}" in g for i in range(3)),
         "grandchild map lacks its functions"),
        (not any(n in ("only_in_child_g1", "only_in_parent") or n.startswith("child_loop_g1")
                 for n in g), "grandchild map has its parent's or grandparent's functions"),
    ]
    bad = [msg for ok, msg in checks if not ok]
    if bad:
        fail("; ".join(bad))
    print(f"OK: parent {res['parent']}, child {res['child']} and grandchild {gc[0]} maps "
          f"hold only their own post-fork functions ({len(p)} / {len(c)} / {len(g)} "
          f"entries); forks from nested calls returned normally")
    return 0


if __name__ == "__main__":
    sys.exit(main())
