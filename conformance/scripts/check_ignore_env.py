# requires: perf
# checks: behaviour
"""-E and -I ignore PYTHONPERFSUPPORT (as every PYTHON* variable), -X perf
still works with -E.

Compares against a control run without -E, so the check cannot pass just
because the variable is ignored altogether.
"""
import os
import subprocess
import sys

PROBE = ("import os, sys; print(sys.is_stack_trampoline_active(), "
         "os.path.exists('/tmp/perf-%d.map' % os.getpid()), os.getpid())")


def run(args):
    env = dict(os.environ, PYTHONPERFSUPPORT="1")
    proc = subprocess.run([sys.executable, *args, "-c", PROBE],
                          capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {args}: exit {proc.returncode}: {proc.stderr}")
    out = proc.stdout.split()
    try:
        os.unlink(f"/tmp/perf-{out[2]}.map")
    except FileNotFoundError:
        pass
    return out[:2]


def main():
    cases = [
        ([], ["True", "True"], "PYTHONPERFSUPPORT=1 (control)"),
        (["-E"], ["False", "False"], "PYTHONPERFSUPPORT=1 with -E"),
        (["-I"], ["False", "False"], "PYTHONPERFSUPPORT=1 with -I"),
        (["-E", "-X", "perf"], ["True", "True"], "-E -X perf"),
    ]
    bad = []
    for args, want, label in cases:
        got = run(args)
        ok = got == want
        print(f"{'ok  ' if ok else 'FAIL'} {label}: active, map exists = {got} (want {want})")
        if not ok:
            bad.append(label)
    if bad:
        print("FAIL:", ", ".join(bad))
        return 1
    print("OK: -E/-I ignore PYTHONPERFSUPPORT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
