# requires: perf
# checks: behaviour
"""A C++ exception and a longjmp() that cross the eval loop land in the frame that waits for them, intact.

An extension written in C++ calls a Python function; three or forty Python
frames deeper, a C++ function of the same extension throws (or longjmp()s
back to the caller's setjmp()).  The exception unwinds through the eval
loop's C frames by their DWARF unwind information, which must give every
caller its registers back, the frame pointer included: with perf frame
records (3.13's patch 31, 3.11's patch 9) the loop is compiled without a
frame pointer and keeps %rbp for its records, and only its assembly entry's
CFI says where the caller's %rbp is.  The catching frame compares its frame
address (__builtin_frame_address(0), its %rbp) and a local of its own with
the values it had before the call; a wrong %rbp shows as either differing,
or as a crash.

Must hold, for both depths: without -X perf, the exception and the jump land
with the frame intact; with -X perf, the jump lands with the frame intact,
and the exception either does the same or ends in std::terminate(): the
trampolines are code written at run time without unwind information that the
C++ runtime can find (in every build with the trampoline, records or not), so
its unwinder stops at the first one.  Never a crash, and never a frame that
lands with other registers.  The process ends with _exit() once it has
landed: the interpreter's own state (its frames, the thread's current frame)
is not restored by either, as in any program that throws across C.
Exit 2 (cannot check) without a C++ compiler or Python.h.
"""
import importlib.machinery
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from childcheck import finish

CANNOT_CHECK = 2
MARK = 0x5EED5EED
DEPTHS = (3, 40)

EXTENSION = r"""
#include <Python.h>
#include <csetjmp>
#include <cstdio>
#include <unistd.h>

// The catching frames are compiled at -O0, which keeps every local at an offset from %rbp: a caller whose
// %rbp is not given back reads a wrong value and a wrong frame address.
static void *frame_before;
static std::jmp_buf *landing;

static void report(const char *how, void *frame, long mark) {
    char text[200];
    int n = snprintf(text, sizeof text, "%s frame=%s mark=%#lx\n", how,
                     frame == frame_before ? "same" : "different", mark);
    (void)!write(1, text, n);
    _exit(frame == frame_before && mark == 0x5eed5eedL ? 0 : 3);
}

static PyObject *throw_int(PyObject *, PyObject *) { throw 0x5eed; }

static PyObject *jump(PyObject *, PyObject *) { std::longjmp(*landing, 7); }

static PyObject *catch_throw(PyObject *, PyObject *callable) {
    volatile long mark = 0x5eed5eedL;
    frame_before = __builtin_frame_address(0);
    try {
        PyObject *result = PyObject_CallNoArgs(callable);
        Py_XDECREF(result);
    } catch (int value) {
        report(value == 0x5eed ? "caught" : "caught-another-value", __builtin_frame_address(0), mark);
    }
    (void)!write(1, "returned\n", 9);
    _exit(4);
}

static PyObject *catch_jump(PyObject *, PyObject *callable) {
    volatile long mark = 0x5eed5eedL;
    std::jmp_buf here;
    frame_before = __builtin_frame_address(0);
    landing = &here;
    if (setjmp(here) == 0) {
        PyObject *result = PyObject_CallNoArgs(callable);
        Py_XDECREF(result);
        (void)!write(1, "returned\n", 9);
        _exit(4);
    }
    report("landed", __builtin_frame_address(0), mark);
    return NULL;
}

static PyMethodDef methods[] = {
    {"throw_int", throw_int, METH_NOARGS, NULL},
    {"jump", jump, METH_NOARGS, NULL},
    {"catch_throw", catch_throw, METH_O, NULL},
    {"catch_jump", catch_jump, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "crossunwind", NULL, -1, methods};

PyMODINIT_FUNC PyInit_crossunwind(void) { return PyModule_Create(&module); }
"""

PROGRAM = r"""
import sys
import crossunwind

how, depth = sys.argv[1], int(sys.argv[2])
leaf = crossunwind.throw_int if how == "throw" else crossunwind.jump

def down(d):
    if d == 0:
        return leaf()
    return down(d - 1)

def start():
    return down(depth - 1)

(crossunwind.catch_throw if how == "throw" else crossunwind.catch_jump)(start)
"""


def build_extension(workdir):
    """The extension's path, or (None, why)."""
    compiler = shutil.which("g++") or shutil.which("c++")
    include = sysconfig.get_paths()["include"]
    if compiler is None:
        return None, "no C++ compiler (g++) in this image"
    if not os.path.exists(os.path.join(include, "Python.h")):
        return None, f"no Python.h in {include}"
    source = os.path.join(workdir, "crossunwind.cpp")
    with open(source, "w") as f:
        f.write(EXTENSION)
    target = os.path.join(workdir, "crossunwind" + importlib.machinery.EXTENSION_SUFFIXES[0])
    cmd = [compiler, "-shared", "-fPIC", "-O0", "-fno-omit-frame-pointer", f"-I{include}",
           f"-I{sysconfig.get_config_var('INCLUDEPY')}", source, "-o", target]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0:
        return None, f"the C++ extension does not build: {' '.join(cmd)}: {built.stderr[-600:]}"
    return target, None


def main():
    workdir = tempfile.mkdtemp()
    try:
        extension, why = build_extension(workdir)
        if extension is None:
            print(f"cannot check: {why}")
            return CANNOT_CHECK
        program = os.path.join(workdir, "cross.py")
        with open(program, "w") as f:
            f.write(PROGRAM)
        env = dict(os.environ, PYTHONPATH=workdir)
        env.pop("PYTHONPERFSUPPORT", None)
        env.pop("PYTHON_PERF_JIT_SUPPORT", None)
        problems = []
        for options in ([], ["-X", "perf"]):
            mode = "-X perf" if options else "inactive"
            for how in ("throw", "jump"):
                for depth in DEPTHS:
                    run = subprocess.run([sys.executable, *options, program, how, str(depth)], env=env,
                                         capture_output=True, text=True, timeout=120)
                    out = run.stdout.strip()
                    terminated = run.returncode == -6 and "terminate called" in run.stderr
                    print(f"{mode}, {how} through {depth} Python frames: exit {run.returncode}, "
                          f"{out or run.stderr.strip()[-200:]}")
                    if run.returncode == 0 and out.startswith(("caught frame=same", "landed frame=same")):
                        continue
                    if how == "throw" and options and terminated:
                        continue   # the trampolines have no unwind information the C++ runtime finds
                    problems.append(f"{mode}: a {'C++ exception' if how == 'throw' else 'longjmp()'} through "
                                    f"{depth} Python frames: exit {run.returncode}, {out!r}, "
                                    f"{run.stderr.strip()[-300:]!r}")
        return finish(problems)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
