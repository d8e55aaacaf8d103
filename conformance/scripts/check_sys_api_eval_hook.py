# requires: perf
# checks: behaviour
"""The sys API under a PEP 523 frame evaluator (upstream's test_sys_api with an eval hook, gh-137291).

Upstream's test_perf_profiler runs test_sys_api twice, the second time with
_testinternalcapi.set_eval_frame_record() installed first: the trampoline
must start although a frame evaluator is present, the program must print
nothing on stderr, and the perf map must hold the functions called while the
trampoline was active (py::spam, py::bar, py::baz) and not the one called
while it was off (py::foo).  This check asks the same of every cell, with a
hook of its own (a small C extension built with the image's cc against the
interpreter's headers, the same on 3.9, where _testinternalcapi has no
set_eval_frame_record, and later versions) that counts the frames it
evaluates, and asks more:
  * the hook keeps running under the trampoline (its count grows by at least
    one per call of a function called 50 times while the trampoline is on),
    so the trampoline forwards to it instead of bypassing it;
  * sys.deactivate_stack_trampoline() leaves the hook installed (still the
    interpreter's evaluator, still counting), and py::after_deactivation is
    not in the map;
  * with perf_jit where the interpreter offers it: the same under the hook,
    and the jitdump holds py::under_hook_jit.
Exit 2 (cannot check) when the hook extension cannot be built.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from childcheck import build_extension, offers_perf_jit

CANNOT_CHECK = 2

HOOK_C = r'''
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static unsigned long long calls;

static PyObject *
counting_eval(PyThreadState *tstate, void *frame, int throwflag)
{
    calls++;
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

static PyObject *
install(PyObject *self, PyObject *unused)
{
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(),
                                         (_PyFrameEvalFunction)counting_eval);
    Py_RETURN_NONE;
}

static PyObject *
remove_hook(PyObject *self, PyObject *unused)
{
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(),
                                         _PyEval_EvalFrameDefault);
    Py_RETURN_NONE;
}

static PyObject *
installed(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get())
                           == (_PyFrameEvalFunction)counting_eval);
}

static PyObject *
count(PyObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(calls);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, NULL},
    {"remove", remove_hook, METH_NOARGS, NULL},
    {"installed", installed, METH_NOARGS, NULL},
    {"count", count, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "evalhook", NULL, -1, methods};

PyMODINIT_FUNC
PyInit_evalhook(void)
{
    PyObject *m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
    /* the hook's counter is only touched by the thread running the frames */
    if (m != NULL && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_CLEAR(m);
    }
#endif
    return m;
}
'''

CHILD = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
backend = sys.argv[2]
import evalhook

def foo():
    pass

def spam():
    pass

def bar():
    sys.deactivate_stack_trampoline()
    foo()
    sys.activate_stack_trampoline(backend)
    spam()

def baz():
    bar()

def under_hook():
    pass

def under_hook_jit():
    pass

def after_deactivation():
    pass

out = {"pid": os.getpid()}
evalhook.install()
try:
    sys.activate_stack_trampoline(backend)
except Exception as exc:
    out["activate_error"] = repr(exc)
    evalhook.remove()
    print(json.dumps(out))
    sys.exit(0)
out["active"] = sys.is_stack_trampoline_active()
baz()
before = evalhook.count()
for _ in range(50):
    (under_hook_jit if backend == "perf_jit" else under_hook)()
out["hook_calls_under_trampoline"] = evalhook.count() - before
sys.deactivate_stack_trampoline()
out["active_after_deactivation"] = sys.is_stack_trampoline_active()
out["hook_installed_after_deactivation"] = evalhook.installed()
before = evalhook.count()
for _ in range(10):
    after_deactivation()
out["hook_calls_after_deactivation"] = evalhook.count() - before
evalhook.remove()
print(json.dumps(out))
'''


def jitdump_names(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 40:
        return []
    pos = struct.unpack_from("<I", data, 8)[0]
    names = []
    while pos + 16 <= len(data):
        rid, size = struct.unpack_from("<II", data, pos)
        if size < 16:
            break
        if rid == 0:
            end = data.index(b"\0", pos + 56)
            names.append(data[pos + 56:end].decode("utf-8", "replace"))
        pos += size
    return names


def run(workdir, backend):
    proc = subprocess.run([sys.executable, "-c", CHILD, workdir, backend], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items()
                                            if k not in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT")})
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    res = json.loads(lines[-1]) if lines else {}
    pid = res.get("pid")
    map_path, dump_path = f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"
    entries, jit_names = "", []
    if pid and os.path.exists(map_path):
        with open(map_path, errors="replace") as fh:
            entries = fh.read()
        os.unlink(map_path)
    if pid and os.path.exists(dump_path):
        jit_names = jitdump_names(dump_path)
        os.unlink(dump_path)
    problems = []
    where = f"{backend} under a PEP 523 hook"
    if proc.returncode != 0 or not res:
        return [f"{where}: child exit {proc.returncode}, stderr {proc.stderr.strip()[-1000:]!r}"]
    if "activate_error" in res:
        return [f"{where}: sys.activate_stack_trampoline({backend!r}) raised {res['activate_error']} "
                "(upstream runs the trampoline under an installed frame evaluator, gh-137291)"]
    if proc.stderr.strip():
        problems.append(f"{where}: stderr is not empty: {proc.stderr.strip()[-600:]!r}")
    if not res.get("active"):
        problems.append(f"{where}: not active after activation")
    if res.get("hook_calls_under_trampoline", 0) < 50:
        problems.append(f"{where}: the hook evaluated {res.get('hook_calls_under_trampoline')} frame(s) for 50 "
                        "calls: the trampoline bypasses the installed frame evaluator")
    if res.get("active_after_deactivation"):
        problems.append(f"{where}: still active after sys.deactivate_stack_trampoline()")
    if not res.get("hook_installed_after_deactivation") or res.get("hook_calls_after_deactivation", 0) < 10:
        problems.append(f"{where}: sys.deactivate_stack_trampoline() did not leave the hook in place "
                        f"(installed: {res.get('hook_installed_after_deactivation')}, frames evaluated for 10 "
                        f"calls: {res.get('hook_calls_after_deactivation')})")
    if backend == "perf":
        for want in ("spam", "bar", "baz", "under_hook"):
            if not any(f"py::{want}:" in line for line in entries.splitlines()):
                problems.append(f"{where}: py::{want} is not in the perf map")
        for unwanted in ("foo", "after_deactivation"):
            if any(f"py::{unwanted}:" in line for line in entries.splitlines()):
                problems.append(f"{where}: py::{unwanted} ran with the trampoline off but is in the perf map")
    else:
        if not any("py::under_hook_jit:" in n for n in jit_names):
            problems.append(f"{where}: the jitdump has no py::under_hook_jit ({len(jit_names)} code loads)")
        if any("py::after_deactivation:" in n for n in jit_names):
            problems.append(f"{where}: py::after_deactivation ran with the trampoline off but is in the jitdump")
    print(f"{where}: {res}; {'OK' if not problems else 'FAIL'}")
    return problems


def main():
    with tempfile.TemporaryDirectory(prefix="evalhook-") as workdir:
        lib, why = build_extension(HOOK_C, workdir, "evalhook")
        if lib is None:
            print(f"cannot check: {why}")
            return CANNOT_CHECK
        problems = run(workdir, "perf")
        if offers_perf_jit():
            problems += run(workdir, "perf_jit")
        else:
            print("perf_jit: not offered by this interpreter")
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("OK: the trampoline runs under an installed PEP 523 evaluator and leaves it in place")
    return 0


if __name__ == "__main__":
    sys.exit(main())
