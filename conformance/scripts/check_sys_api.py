# requires: perf
# checks: behaviour
"""sys.*_stack_trampoline API, -X perf / PYTHONPERFSUPPORT, and precedence.

Each case runs a fresh interpreter (sys.executable) and compares what
sys.is_stack_trampoline_active() says, and whether the map file got entries,
with what upstream CPython 3.12+ does:
  * no option: inactive; -X perf: active; PYTHONPERFSUPPORT=1: active;
    PYTHONPERFSUPPORT=0 / =abc: inactive;
  * -X beats the environment: -X perf with PYTHONPERFSUPPORT=0 is active;
  * sys functions beat -X: -X perf + sys.deactivate_stack_trampoline() is
    inactive, and a function first called afterwards gets no map entry;
    sys.activate_stack_trampoline("perf") without options is active;
  * deactivate when nothing is active is a no-op returning None;
  * sysconfig PY_HAVE_PERF_TRAMPOLINE == 1 (this check only runs where perf
    support is claimed).
"""
import json
import os
import subprocess
import sys

PROBE = r'''
import json, os, sys, sysconfig
def before_sys_call():
    return 1
before_sys_call()
active_at_start = sys.is_stack_trampoline_active()
action = sys.argv[1]
ret = "unset"
if action == "activate":
    ret = sys.activate_stack_trampoline("perf")
elif action == "deactivate":
    ret = sys.deactivate_stack_trampoline()
def after_sys_call():
    return 2
after_sys_call()
path = "/tmp/perf-%d.map" % os.getpid()
text = open(path).read() if os.path.exists(path) else None
if text is not None:
    os.unlink(path)
print(json.dumps({
    "start": active_at_start,
    "end": sys.is_stack_trampoline_active(),
    "ret": repr(ret),
    "map": text,
    "have": sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE"),
}))
'''


def run(args, env_extra=None, action="none"):
    env = dict(os.environ)
    env.pop("PYTHONPERFSUPPORT", None)
    env.pop("PYTHON_PERF_JIT_SUPPORT", None)
    if env_extra:
        env.update(env_extra)
    proc = subprocess.run([sys.executable, *args, "-c", PROBE, action],
                          capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {args} {env_extra} {action}: exit "
                         f"{proc.returncode}: {proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def has(res, name):
    return res["map"] is not None and f"py::{name}:<string>" in res["map"]


def main():
    failures = []

    def expect(label, cond, res):
        status = "ok  " if cond else "FAIL"
        print(f"{status} {label}: {res['start']} -> {res['end']}")
        if not cond:
            failures.append(f"{label}: got {res}")

    r = run([])
    expect("no option: inactive, no map", not r["start"] and not r["end"] and r["map"] is None, r)
    expect("PY_HAVE_PERF_TRAMPOLINE == 1", r["have"] == 1, r)
    r = run(["-X", "perf"])
    expect("-X perf: active, map has entries", r["start"] and r["end"]
           and has(r, "before_sys_call") and has(r, "after_sys_call"), r)
    r = run([], {"PYTHONPERFSUPPORT": "1"})
    expect("PYTHONPERFSUPPORT=1: active", r["start"] and r["end"] and has(r, "before_sys_call"), r)
    r = run([], {"PYTHONPERFSUPPORT": "0"})
    expect("PYTHONPERFSUPPORT=0: inactive", not r["start"] and not r["end"] and r["map"] is None, r)
    r = run([], {"PYTHONPERFSUPPORT": "abc"})
    expect("PYTHONPERFSUPPORT=abc: inactive", not r["start"] and not r["end"], r)
    r = run(["-X", "perf"], {"PYTHONPERFSUPPORT": "0"})
    expect("-X perf beats PYTHONPERFSUPPORT=0", r["start"] and r["end"], r)
    r = run(["-X", "perf"], action="deactivate")
    expect("sys.deactivate beats -X perf", r["start"] and not r["end"]
           and r["ret"] == "None" and has(r, "before_sys_call")
           and not has(r, "after_sys_call"), r)
    r = run([], {"PYTHONPERFSUPPORT": "1"}, action="deactivate")
    expect("sys.deactivate beats PYTHONPERFSUPPORT=1", r["start"] and not r["end"]
           and not has(r, "after_sys_call"), r)
    r = run([], action="activate")
    expect("sys.activate('perf') without options", not r["start"] and r["end"]
           and r["ret"] == "None" and has(r, "after_sys_call")
           and not has(r, "before_sys_call"), r)
    r = run([], action="deactivate")
    expect("sys.deactivate when inactive is a no-op", not r["start"] and not r["end"]
           and r["ret"] == "None", r)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK: sys API, -X perf, PYTHONPERFSUPPORT and precedence as upstream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
