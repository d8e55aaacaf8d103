# requires: perf
# hits: patches/3.13/0011 /^unopenable-perf(_jit)?: .* did not raise$/
# hits: gh-146522 /^exhausted-inactive: .*SystemError/
# hits: patches/3.13/0011 /^exhausted-active: child exit status 1; stderr: 'SystemError: .*bad argument to internal function/
# checks: behaviour
"""A failed sys.activate_stack_trampoline() leaves the interpreter exactly as it was.

In child interpreters:
  1. inactive: activate("nope") raises ValueError; still inactive; a function
     called afterwards appears in no map.
  2. "perf" active: activate("nope") raises ValueError; still active, and a
     brand-new function called afterwards is in /tmp/perf-PID.map (the backend
     still maps), not in a jitdump.
  3. "perf_jit" active (where the interpreter offers it): the same, and the
     new function goes to /tmp/jit-PID.dump, not to the perf map.
  4. A failure of the activation itself (not a bad name): with ctypes, every
     free co_extra index is taken (PyUnstable_Eval_RequestCodeExtraIndex /
     _PyEval_RequestCodeExtraIndex until it returns -1), then (a) from "perf"
     active, activate("perf_jit") where offered; (b) from inactive, after a
     "perf" activation and deactivation, activate("perf_jit") (or "perf" again
     where perf_jit is not offered).  Either the activation succeeds and the
     new backend maps new functions, or it raises an exception that is not
     SystemError and leaves the state as before: active with the old backend
     still mapping new functions / still inactive, and in (b) activate("perf")
     works afterwards wherever it works without the failed call (a control
     child, indexes taken the same way, shows whether it does).  Calls keep
     working and the child ends with exit status 0.
  5. The new backend cannot open its output (where perf_jit is offered): a
     directory stands at /tmp/perf-PID.map while switching from "perf_jit" to
     "perf", or at /tmp/jit-PID.dump while switching from "perf" to
     "perf_jit".  The switch raises an OSError; the old backend stays active
     and keeps its output: what it had written before the switch is still
     there, and a brand-new function called afterwards is added to it (and not
     to the failed backend's output).

Seen before the fix: (4a) the switch raised RuntimeError("perf trampoline: no
code object extra index left") and left the trampoline "active" without an
index: 3.9 crashed (SIGSEGV) on the next call, 3.11 mapped nothing any more
(and made a new trampoline on every call); (4b) the failed perf_jit call had
dropped perf's index, so activate("perf") failed too.  (5) The old backend
was stopped before the new one failed: the jitdump lost everything written
before the failed switch.
"""
import json
import os
import subprocess
import sys

from childcheck import describe_exit, jitdump_code_loads

CHILD = r'''
import json, os, sys

def probe(label):
    # a brand-new code object each time: its name says when it was made
    ns = {}
    exec("def %s(n):\n    return n + 1\n" % label, ns)
    for i in range(3):
        ns[label](i)

def outcome(call):
    try:
        call()
    except BaseException as exc:
        return {"type": type(exc).__name__, "repr": repr(exc), "errno": getattr(exc, "errno", None)}
    return None

def offers_perf_jit():
    try:
        sys.activate_stack_trampoline("perf_jit")
    except ValueError:
        return False
    finally:
        sys.deactivate_stack_trampoline()
    return True

case = sys.argv[1]
out = {"pid": os.getpid(), "case": case}
if case == "inactive":
    out["exc"] = outcome(lambda: sys.activate_stack_trampoline("nope"))
    out["active"] = sys.is_stack_trampoline_active()
    probe("after_nope_inactive")
elif case in ("perf", "perf_jit"):
    sys.activate_stack_trampoline(case)
    probe("before_nope")
    out["exc"] = outcome(lambda: sys.activate_stack_trampoline("nope"))
    out["active"] = sys.is_stack_trampoline_active()
    probe("after_nope_" + case)
elif case.startswith("exhausted"):
    import ctypes
    api = ctypes.pythonapi
    name = next(n for n in ("PyUnstable_Eval_RequestCodeExtraIndex", "_PyEval_RequestCodeExtraIndex")
                if hasattr(api, n))
    request = getattr(api, name)
    request.argtypes = [ctypes.c_void_p]
    request.restype = ctypes.c_ssize_t
    jit = offers_perf_jit()
    out["offers_perf_jit"] = jit
    target = "perf_jit" if jit else "perf"
    if case == "exhausted-active":
        sys.activate_stack_trampoline("perf")
        probe("old_backend_before")
    elif case == "exhausted-control":
        target = "perf"
        sys.activate_stack_trampoline("perf")
        sys.deactivate_stack_trampoline()
    else:
        sys.activate_stack_trampoline("perf")
        sys.deactivate_stack_trampoline()
    taken = 0
    while request(None) >= 0:
        taken += 1
    out["indexes_taken"] = taken
    out["target"] = target
    out["exc"] = outcome(lambda: sys.activate_stack_trampoline(target))
    out["active"] = sys.is_stack_trampoline_active()
    print(json.dumps(dict(out, stage="in the calls made after the activation")), flush=True)
    probe("after_failed_switch")
    out["calls_ok"] = sum(i * 2 for i in range(1000)) == 999000
    if case == "exhausted-inactive" and target != "perf":
        # before the failed call, activate("perf") would have worked (the control case shows
        # whether it does with every index taken): it must still work after it
        out["reactivate"] = outcome(lambda: sys.activate_stack_trampoline("perf"))
        out["reactivated"] = sys.is_stack_trampoline_active()
        probe("after_reactivation")
    if case == "exhausted-control":
        out["reactivate"] = out["exc"]
        out["reactivated"] = out["active"]
elif case.startswith("unopenable-"):
    target = case[len("unopenable-"):]
    old = "perf" if target == "perf_jit" else "perf_jit"
    blocker = ("/tmp/perf-%d.map" if target == "perf" else "/tmp/jit-%d.dump") % os.getpid()
    out["target"] = target
    sys.activate_stack_trampoline(old)
    probe("old_backend_before")
    os.mkdir(blocker)
    try:
        out["exc"] = outcome(lambda: sys.activate_stack_trampoline(target))
        out["active"] = sys.is_stack_trampoline_active()
        probe("after_failed_switch")
    finally:
        os.rmdir(blocker)
    sys.deactivate_stack_trampoline()
print(json.dumps(out), flush=True)
'''


def run(case):
    """Run one case; (report, names in the perf map, names in the jitdump) or raise Fail."""
    proc = subprocess.run([sys.executable, "-c", CHILD, case], capture_output=True, text=True, timeout=300)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    res = json.loads(lines[-1]) if lines else None
    if proc.returncode != 0 or res is None:
        pid = res["pid"] if res else None
        cleanup(pid)
        stage = res.pop("stage", "") if res else ""
        raise Fail(f"{case}: child {describe_exit(proc.returncode)}"
                   + (f" {stage}; it had reported {res}" if res else "")
                   + f"; stderr: {proc.stderr.strip()[-1200:]!r}")
    pid = res["pid"]
    pmap, dump = f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"
    map_names = []
    if os.path.exists(pmap):
        with open(pmap) as fh:
            map_names = [l.split(" ", 2)[2] for l in fh.read().splitlines() if l.count(" ") >= 2]
    # a malformed dump is not this check's concern: the names of the records that could be walked
    jit_names = jitdump_code_loads(dump)[0] if os.path.exists(dump) else []
    cleanup(pid)
    return res, map_names, jit_names


def cleanup(pid):
    if pid is None:
        return
    for path in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
        if os.path.exists(path):
            os.unlink(path)


class Fail(Exception):
    pass


def sym(fn):
    return f"py::{fn}:<string>"


def expect_value_error(res):
    exc = res["exc"]
    if exc is None:
        raise Fail(f"{res['case']}: activate_stack_trampoline('nope') did not raise")
    if exc["type"] != "ValueError":
        raise Fail(f"{res['case']}: activate_stack_trampoline('nope') raised {exc['repr']}, not ValueError")


def case_inactive():
    res, map_names, jit_names = run("inactive")
    expect_value_error(res)
    if res["active"]:
        raise Fail("inactive: active after activate('nope')")
    if sym("after_nope_inactive") in map_names + jit_names:
        raise Fail("inactive: a function called after activate('nope') was mapped")
    return "inactive stays inactive"


def case_perf():
    res, map_names, jit_names = run("perf")
    expect_value_error(res)
    if not res["active"]:
        raise Fail("perf: no longer active after activate('nope')")
    if sym("after_nope_perf") not in map_names:
        raise Fail(f"perf: a function called after activate('nope') is not in the perf map "
                   f"(the map has {len(map_names)} entries)")
    if sym("after_nope_perf") in jit_names:
        raise Fail("perf: a function called after activate('nope') went to a jitdump")
    return "perf stays active and maps"


def case_perf_jit():
    res, map_names, jit_names = run("perf_jit")
    expect_value_error(res)
    if not res["active"]:
        raise Fail("perf_jit: no longer active after activate('nope')")
    if sym("after_nope_perf_jit") not in jit_names:
        raise Fail(f"perf_jit: a function called after activate('nope') has no code load in the jitdump "
                   f"({len(jit_names)} loads)")
    if sym("after_nope_perf_jit") in map_names:
        raise Fail("perf_jit: a function called after activate('nope') went to the perf map "
                   "(the backend changed)")
    return "perf_jit stays active, same backend"


def case_exhausted(case):
    res, map_names, jit_names = run(case)
    target, exc, new = res["target"], res["exc"], sym("after_failed_switch")
    mapped_to = {"perf": map_names, "perf_jit": jit_names}
    if not res["calls_ok"]:
        raise Fail(f"{case}: calls give wrong results")
    if exc is None:
        # the activation succeeded: the new backend must be the one mapping
        if not res["active"] or new not in mapped_to[target]:
            raise Fail(f"{case}: activate({target!r}) with every co_extra index taken "
                       f"({res['indexes_taken']}) succeeded but active={res['active']}, "
                       f"new function in the {target} output: {new in mapped_to[target]}")
        return f"{case}: activate({target!r}) succeeded and maps"
    if exc["type"] == "SystemError":
        raise Fail(f"{case}: activate({target!r}) raised SystemError: {exc['repr']}")
    if case == "exhausted-active":
        if not res["active"]:
            raise Fail(f"{case}: after the failed activate({target!r}) ({exc['repr']}) the "
                       f"trampoline is inactive; it was active with 'perf' before")
        if new not in map_names:
            raise Fail(f"{case}: after the failed activate({target!r}) ({exc['repr']}) the old "
                       f"'perf' backend no longer maps new functions")
        if target != "perf" and new in jit_names:
            raise Fail(f"{case}: the failed activate({target!r}) still sent new functions there")
    else:
        if res["active"]:
            raise Fail(f"{case}: after the failed activate({target!r}) ({exc['repr']}) the "
                       f"trampoline is active; it was inactive before")
        if new in map_names + jit_names:
            raise Fail(f"{case}: after the failed activate({target!r}) functions are still mapped")
        if "reactivate" in res:
            control, _, _ = run("exhausted-control")
            if control["exc"] is None and control["active"]:
                # activate("perf") works with every index taken: after the failed call it still must
                if res["reactivate"] is not None or not res["reactivated"]:
                    raise Fail(f"{case}: after the failed activate({target!r}) ({exc['repr']}), "
                               f"activate('perf') raised {res['reactivate'] and res['reactivate']['repr']}, "
                               f"active={res['reactivated']}; without the failed call it succeeds "
                               f"(the failure changed the interpreter's state)")
                if sym("after_reactivation") not in map_names:
                    raise Fail(f"{case}: after the failed activate({target!r}), activate('perf') succeeded "
                               f"but new functions are not in the perf map")
                return (f"{case}: activate({target!r}) raised {exc['type']}, state kept; "
                        f"activate('perf') works afterwards")
    return f"{case}: activate({target!r}) raised {exc['type']}, state kept"


def case_unopenable(target):
    case = f"unopenable-{target}"
    res, map_names, jit_names = run(case)
    exc, old = res["exc"], ("perf" if target == "perf_jit" else "perf_jit")
    outputs = {"perf": ("perf map", map_names), "perf_jit": ("jitdump", jit_names)}
    old_label, old_names = outputs[old]
    new_label, new_names = outputs[target]
    what = f"{case}: from {old!r}, activate({target!r}) with its {new_label} unopenable (a directory)"
    if exc is None:
        raise Fail(f"{what} did not raise")
    if exc["errno"] is None:
        raise Fail(f"{what} raised {exc['repr']}, not an OSError")
    if not res["active"]:
        raise Fail(f"{what} raised {exc['type']} and left the trampoline inactive; {old!r} was active")
    if sym("old_backend_before") not in old_names:
        raise Fail(f"{what}: the {old_label} lost what it held before the failed switch "
                   f"({len(old_names)} entries left)")
    if sym("after_failed_switch") not in old_names:
        raise Fail(f"{what}: the {old!r} backend no longer adds new functions to the {old_label}")
    if sym("after_failed_switch") in new_names:
        raise Fail(f"{what}: a function called after the failed switch went to the {new_label}")
    return f"{case}: {exc['type']}, {old!r} kept its {old_label}"


def main():
    cases = [case_inactive, case_perf]
    probe = subprocess.run([sys.executable, "-c",
                            "import sys\ntry:\n sys.activate_stack_trampoline('perf_jit')\n"
                            "except ValueError:\n print('no')\nelse:\n print('yes')"],
                           capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() == "yes":
        cases += [case_perf_jit, lambda: case_unopenable("perf"), lambda: case_unopenable("perf_jit")]
    notes, failures = [], []
    try:
        import ctypes  # noqa: F401  (the child needs it)
    except ImportError:
        notes.append("no ctypes: the exhausted-index cases are not checked")
    else:
        cases += [lambda: case_exhausted("exhausted-active"), lambda: case_exhausted("exhausted-inactive")]
    for case in cases:
        try:
            notes.append(case())
        except Fail as exc:
            failures.append(str(exc))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        if notes:
            print("passed: " + "; ".join(notes))
        return 1
    print("OK: " + "; ".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
