"""What a build-only cell's interpreter does where there is no perf trampoline (i386).

Run by conformance/test_build_only.py inside the cell; prints one JSON object
that the test asserts on.  Stdlib only (ctypes; the extension check also needs
the C compiler of the cell's image).  Modes:

  api        ctypes.pythonapi looks up the six PyUnstable_Perf* functions (what
             the dynamic loader resolves for an extension) and calls them as
             a JIT would: the perf map API works on every Linux arch, the
             trampoline functions answer 0 where there is no trampoline
  extension  compiles a C extension that calls the trampoline functions and
             holds the address of every one, and imports it: on a build that
             lacks a symbol the import fails with "undefined symbol"
  activate   sys.activate_stack_trampoline() for each backend, and the state after
  status     is a trampoline active in this process (run under -X perf,
             PYTHONPERFSUPPORT=1, ...), and a little work done
"""
import ctypes
import json
import os
import subprocess
import sys
import sysconfig

FUNCTIONS = (
    "PyUnstable_PerfMapState_Init",
    "PyUnstable_WritePerfMapEntry",
    "PyUnstable_PerfMapState_Fini",
    "PyUnstable_CopyPerfMapFile",
    "PyUnstable_PerfTrampoline_CompileCode",
    "PyUnstable_PerfTrampoline_SetPersistAfterFork",
)


def api():
    api = ctypes.pythonapi
    out = {"lookup": {}}
    for name in FUNCTIONS:
        try:
            getattr(api, name)
            out["lookup"][name] = "ok"
        except AttributeError as exc:   # dlsym failed: "undefined symbol: NAME"
            out["lookup"][name] = str(exc)
    if any(v != "ok" for v in out["lookup"].values()):
        return out
    api.PyUnstable_PerfMapState_Init.restype = ctypes.c_int
    api.PyUnstable_WritePerfMapEntry.restype = ctypes.c_int
    api.PyUnstable_WritePerfMapEntry.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p]
    api.PyUnstable_PerfMapState_Fini.restype = None
    api.PyUnstable_CopyPerfMapFile.restype = ctypes.c_int
    api.PyUnstable_CopyPerfMapFile.argtypes = [ctypes.c_char_p]
    api.PyUnstable_PerfTrampoline_CompileCode.restype = ctypes.c_int
    api.PyUnstable_PerfTrampoline_CompileCode.argtypes = [ctypes.py_object]
    api.PyUnstable_PerfTrampoline_SetPersistAfterFork.restype = ctypes.c_int
    api.PyUnstable_PerfTrampoline_SetPersistAfterFork.argtypes = [ctypes.c_int]

    def work():
        return sum(range(10))

    path = "/tmp/perf-%d.map" % os.getpid()
    parent = "/tmp/build-only-parent.map"
    with open(parent, "w") as f:
        f.write("2000 80 build_only::copied\n")
    out["init"] = api.PyUnstable_PerfMapState_Init()
    out["map_created"] = os.path.exists(path)
    out["write"] = api.PyUnstable_WritePerfMapEntry(0x1000, 0x40, b"build_only::written")
    out["copy"] = api.PyUnstable_CopyPerfMapFile(parent.encode())
    out["compile_code"] = api.PyUnstable_PerfTrampoline_CompileCode(work.__code__)
    out["persist_after_fork"] = api.PyUnstable_PerfTrampoline_SetPersistAfterFork(1)
    out["work"] = work()
    api.PyUnstable_PerfMapState_Fini()
    with open(path) as f:
        out["map_lines"] = f.read().splitlines()
    out["trampoline_active"] = sys.is_stack_trampoline_active() if hasattr(sys, "is_stack_trampoline_active") else None
    return out


EXTENSION = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The address of every function: the loader must resolve all six to load the module. */
static void *const perf_api[] = {
    (void *)PyUnstable_PerfMapState_Init,
    (void *)PyUnstable_WritePerfMapEntry,
    (void *)PyUnstable_PerfMapState_Fini,
    (void *)PyUnstable_CopyPerfMapFile,
    (void *)PyUnstable_PerfTrampoline_CompileCode,
    (void *)PyUnstable_PerfTrampoline_SetPersistAfterFork,
};

static PyObject *
compile_code(PyObject *self, PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "a code object is needed");
        return NULL;
    }
    return PyLong_FromLong(PyUnstable_PerfTrampoline_CompileCode((PyCodeObject *)code));
}

static PyObject *
persist_after_fork(PyObject *self, PyObject *arg)
{
    return PyLong_FromLong(PyUnstable_PerfTrampoline_SetPersistAfterFork((int)PyLong_AsLong(arg)));
}

static PyObject *
resolved(PyObject *self, PyObject *unused)
{
    Py_ssize_t n = 0;
    for (size_t i = 0; i < sizeof(perf_api) / sizeof(perf_api[0]); i++) {
        n += perf_api[i] != NULL;
    }
    return PyLong_FromSsize_t(n);
}

static PyMethodDef methods[] = {
    {"compile_code", compile_code, METH_O, NULL},
    {"persist_after_fork", persist_after_fork, METH_O, NULL},
    {"resolved", resolved, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "perfapi_ext", NULL, -1, methods};

PyMODINIT_FUNC
PyInit_perfapi_ext(void)
{
    return PyModule_Create(&module);
}
"""


def extension():
    build = "/tmp/perfapi-ext"
    os.makedirs(build, exist_ok=True)
    source = os.path.join(build, "perfapi_ext.c")
    with open(source, "w") as f:
        f.write(EXTENSION)
    target = os.path.join(build, "perfapi_ext" + sysconfig.get_config_var("EXT_SUFFIX"))
    # -Werror=implicit-function-declaration: the public headers must declare all six, as upstream's do
    cmd = ["cc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror=implicit-function-declaration",
           "-I" + sysconfig.get_paths()["include"], source, "-o", target]
    done = subprocess.run(cmd, capture_output=True, text=True)
    out = {"compile": " ".join(cmd), "compile_exit": done.returncode, "compile_output": (done.stdout + done.stderr)[-3000:],
           "target": os.path.basename(target)}
    if done.returncode != 0:
        return out
    sys.path.insert(0, build)
    try:
        import perfapi_ext
    except ImportError as exc:
        out["import"] = "%s: %s" % (type(exc).__name__, exc)
        return out
    out["import"] = "ok"

    def work():
        return 1

    out["resolved"] = perfapi_ext.resolved()
    out["compile_code"] = perfapi_ext.compile_code(work.__code__)
    out["persist_after_fork"] = perfapi_ext.persist_after_fork(1)
    return out


def activate():
    out = {"active_before": sys.is_stack_trampoline_active(), "activate": {}}
    for backend in ("perf", "perf_jit"):
        try:
            sys.activate_stack_trampoline(backend)
            out["activate"][backend] = None
        except Exception as exc:
            out["activate"][backend] = {"type": type(exc).__name__, "message": str(exc)}
    out["active_after"] = sys.is_stack_trampoline_active()
    try:
        out["deactivate"] = repr(sys.deactivate_stack_trampoline())
    except Exception as exc:
        out["deactivate"] = "%s: %s" % (type(exc).__name__, exc)
    out["active_at_end"] = sys.is_stack_trampoline_active()
    return out


def status():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    return {"pid": os.getpid(), "active": sys.is_stack_trampoline_active(), "fib20": fib(20),
            "xoptions": sorted(sys._xoptions)}


if __name__ == "__main__":
    mode = sys.argv[1]
    print(json.dumps({"api": api, "extension": extension, "activate": activate, "status": status}[mode]()))
