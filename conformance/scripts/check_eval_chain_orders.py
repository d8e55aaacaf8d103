# requires: perf perf_jit
# checks: behaviour
"""The trampoline and another PEP 523 evaluator, set and removed in every order, never crash the interpreter.

Debuggers, tracers and JIT front ends install a frame evaluator of their own
(PEP 523).  Most of them chain: they keep the evaluator they replace and
call it for every frame.  When such an evaluator is installed over the
trampoline's, it calls the trampoline's; when the trampoline is then
activated again, the trampoline calls it back: each has the other as the
evaluator to run next, and a call recursed until the C stack ran out.

A small C extension is built here with the image's cc against the
interpreter's headers.  It offers two evaluators: `chaining` keeps the one
it replaces and calls it, `direct` calls _PyEval_EvalFrameDefault().  Every
sequence of up to four steps from

    C  install the chaining evaluator     D  install the direct evaluator
    R  remove the one installed last      A  activate the trampoline (perf)
    J  activate it with perf_jit          X  deactivate it

runs in a forked child (and those of up to two steps, with the issue's own
orders, in a fresh interpreter that then exits normally, so that
finalization runs too).  Then a function is called, and must hold:

  - no crash, no hang, and the function's result is right;
  - an activation succeeds (and the trampoline is then active) or raises
    RuntimeError saying why; a deactivation leaves it inactive;
  - no evaluator runs more than once for one frame, and the evaluator the
    interpreter has on top runs for every frame;
  - while the trampoline is active, the function is named in the output of
    the backend last activated (/tmp/perf-PID.map or /tmp/jit-PID.dump), and
    a Python frame runs through a trampoline; from a deactivation on, until
    an activation succeeds again, none does, even where the trampoline's
    evaluator stays in the chain under another one (it then only passes
    frames on).  A frame runs through a trampoline when the C stack under it
    has a return address in no loaded object (backtrace() and dladdr(): the
    trampolines live in anonymous executable memory), or, in a build with
    frame records (3.13's patch 31, 3.11's patch 9: the frame runs inline, named
    by its trampoline's return address), when the frame-pointer chain has.

Exit 2 (cannot check) where the extension does not build or the
interpreter has no trampoline.
"""
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from childcheck import build_extension, describe_exit, finish, read_to_end, remove_perf_files

CANNOT_CHECK = 2
STEPS = "CDRAJX"
FORKED_LENGTH = 4          # every sequence up to this many steps, each in a forked child
FRESH_LENGTH = 2           # and up to this many in a fresh interpreter that finalizes
NAMED_ORDERS = ["ACXA", "ACA", "CAXA", "ADXA", "ACJ", "ACRXA", "AJCXJA", "CADRXA"]
CALLS = 50
MAX_SHOWN = 12             # orders whose problems are told in full

EXTENSION = r'''
#include <Python.h>
#include <dlfcn.h>
#include <execinfo.h>
#if PY_VERSION_HEX >= 0x030B0000
typedef struct _PyInterpreterFrame evalchain_frame;
#else
#include <frameobject.h>
typedef PyFrameObject evalchain_frame;
#endif

/* The evaluators installed here, last on top; each keeps the one it replaced. */
typedef struct {
    int kind;                      /* 'C' chaining, 'D' direct */
    _PyFrameEvalFunction replaced;
} installed_t;
static installed_t installed[64];
static int n_installed;
static long calls_chaining, calls_direct;

static _PyFrameEvalFunction
replaced_by(int kind)
{
    /* The evaluator the newest installation of `kind` replaced. */
    for (int i = n_installed - 1; i >= 0; i--) {
        if (installed[i].kind == kind) {
            return installed[i].replaced;
        }
    }
    return _PyEval_EvalFrameDefault;
}

static PyObject *
chaining_eval(PyThreadState *ts, evalchain_frame *frame, int throwflag)
{
    calls_chaining++;
    return replaced_by('C')(ts, frame, throwflag);
}

static PyObject *
direct_eval(PyThreadState *ts, evalchain_frame *frame, int throwflag)
{
    calls_direct++;
    return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

static PyObject *
install(int kind)
{
    if (n_installed == 64) {
        PyErr_SetString(PyExc_RuntimeError, "too many");
        return NULL;
    }
    for (int i = 0; i < n_installed; i++) {
        if (installed[i].kind == kind) {
            Py_RETURN_FALSE;   /* one of each at a time, as a tool installs itself once */
        }
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    installed[n_installed].kind = kind;
    installed[n_installed].replaced = _PyInterpreterState_GetEvalFrameFunc(interp);
    n_installed++;
    _PyInterpreterState_SetEvalFrameFunc(
        interp, kind == 'C' ? (_PyFrameEvalFunction)chaining_eval : (_PyFrameEvalFunction)direct_eval);
    Py_RETURN_TRUE;
}

static PyObject *
install_chaining(PyObject *self, PyObject *unused) { return install('C'); }

static PyObject *
install_direct(PyObject *self, PyObject *unused) { return install('D'); }

/* Remove the evaluator installed last: put back the one it replaced, as such tools do. */
static PyObject *
remove_last(PyObject *self, PyObject *unused)
{
    if (n_installed == 0) {
        Py_RETURN_NONE;
    }
    n_installed--;
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), installed[n_installed].replaced);
    Py_RETURN_NONE;
}

static PyObject *
calls(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("(ll)", calls_chaining, calls_direct);
}

/* "C" or "D" if the interpreter's evaluator is one of these, "default"
   for the default one, "other" for another (the trampoline's). */
static PyObject *
top(PyObject *self, PyObject *unused)
{
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
    const char *name = cur == (_PyFrameEvalFunction)chaining_eval ? "C"
                     : cur == (_PyFrameEvalFunction)direct_eval ? "D"
                     : cur == _PyEval_EvalFrameDefault ? "default" : "other";
    return PyUnicode_FromString(name);
}

/* The first return address outside every loaded object in the frame-
   pointer chain above this function (what perf -g walks), within this
   thread's stack, or 0: the eval loop's frame records (3.13's patch 31, 3.11's 9) name
   a Python frame it runs inline by its trampoline's return address, with no
   C call.  Only asked in a build with frame records, where every frame
   keeps %rbp. */
#include <pthread.h>
#include <stdint.h>
__attribute__((noinline, optimize("no-omit-frame-pointer")))
static uintptr_t
frame_records_first_trampoline(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    pthread_attr_t attr;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return 0;
    }
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    uintptr_t low = (uintptr_t)lo, high = low + size;
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    for (int i = 0; i < 256; i++) {
        if (fp < low || fp + 16 > high || (fp & 7)) {
            break;
        }
        uintptr_t next = ((uintptr_t *)fp)[0], ret = ((uintptr_t *)fp)[1];
        Dl_info info;
        if (ret != 0 && dladdr((void *)ret, &info) == 0) {
            return ret;
        }
        if (next <= fp) {
            break;
        }
        fp = next;
    }
#endif
    return 0;
}

/* Whether the C stack of the calling Python frame holds a return address
   outside every loaded object: a trampoline's.  The unwinder stops at the
   first one (perf map trampolines carry no unwind tables), which is the one
   under the calling frame's eval loop: True.  Otherwise, with frame records
   (the argument true), the first such address of the frame-pointer chain
   (the caller tells whose trampoline it is), or False. */
static PyObject *
on_trampoline(PyObject *self, PyObject *records)
{
    void *addrs[128];
    int n = backtrace(addrs, 128);
    for (int i = 1; i < n; i++) {
        Dl_info info;
        if (dladdr(addrs[i], &info) == 0) {
            Py_RETURN_TRUE;
        }
    }
    uintptr_t ret = PyObject_IsTrue(records) ? frame_records_first_trampoline() : 0;
    if (ret != 0) {
        return PyLong_FromUnsignedLongLong(ret);
    }
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"on_trampoline", on_trampoline, METH_O, NULL},
    {"install_chaining", install_chaining, METH_NOARGS, NULL},
    {"install_direct", install_direct, METH_NOARGS, NULL},
    {"remove_last", remove_last, METH_NOARGS, NULL},
    {"calls", calls, METH_NOARGS, NULL},
    {"top", top, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_evalchain", NULL, 0, methods, slots,
};

PyMODINIT_FUNC
PyInit__evalchain(void)
{
    return PyModuleDef_Init(&module);
}
'''

# Run in each child: the steps of one sequence, then the checks.  Prints "ok" or the problems, one a line.
CHILD = r'''
import os, sys, sysconfig
import _evalchain

def f(x):
    return x + 1

def gen(n):
    for i in range(n):
        yield f(i)

# frame records (3.13's patch 31, 3.11's patch 9): a frame run inline is shown by a record, not by a C frame
FRAME_RECORDS = "-DPy_PERF_FRAME_RECORDS" in (sysconfig.get_config_var("CEVAL_FRAME_RECORDS_CFLAGS") or "")

def via_trampoline():
    hit = _evalchain.on_trampoline(FRAME_RECORDS)
    if hit is True or hit is False:
        return hit
    # a frame record's return address: through a trampoline if it is this function's own (an outer
    # frame's record, written while a trampoline was active, is not), as the perf map names it
    try:
        with open(f"/tmp/perf-{os.getpid()}.map") as fh:
            for line in fh:
                start, size, name = line.rstrip("\n").split(" ", 2)
                if int(start, 16) <= hit < int(start, 16) + int(size, 16):
                    return name.startswith("py::via_trampoline:")
    except OSError:
        pass
    return False

def run(seq, calls):
    """Run the steps, call f; (problems, what happened in words)."""
    problems = []
    said = []
    backend = None         # the backend of the last activation that succeeded
    deactivated = True     # no activation has succeeded since the start or the last deactivation
    installed = []         # our evaluators installed and not removed, last on top
    for i, step in enumerate(seq):
        where = f"step {i + 1} ({step})"
        if step == "C":
            if _evalchain.install_chaining():
                installed.append("C")
        elif step == "D":
            if _evalchain.install_direct():
                installed.append("D")
        elif step == "R":
            _evalchain.remove_last()
            if installed:
                installed.pop()
        elif step in "AJ":
            mode = "perf" if step == "A" else "perf_jit"
            try:
                sys.activate_stack_trampoline(mode)
            except RuntimeError as exc:
                said.append(f"{step}: RuntimeError")
                if not str(exc):
                    problems.append(f"{where}: RuntimeError without a reason")
            except Exception as exc:
                problems.append(f"{where}: activation raised {type(exc).__name__}: {exc}")
            else:
                backend = mode
                deactivated = False
                if not sys.is_stack_trampoline_active():
                    problems.append(f"{where}: activation succeeded but the trampoline is not active")
        elif step == "X":
            sys.deactivate_stack_trampoline()
            deactivated = True
            if sys.is_stack_trampoline_active():
                problems.append(f"{where}: still active after deactivation")
        f(0)                 # a frame between the steps
        via_trampoline()     # and its code published while a trampoline runs
    total = 0
    before = _evalchain.calls()
    for i in range(calls):       # no frame but f's: a loop in this frame
        total += f(i)
    after = _evalchain.calls()
    if total != calls * (calls + 1) // 2:
        problems.append(f"wrong result {total}")
    if sum(gen(10)) != 55:
        problems.append("a generator gave a wrong result")
    ran = {"C": after[0] - before[0], "D": after[1] - before[1]}
    for kind, n in ran.items():
        if n not in (0, calls):
            problems.append(f"the {kind} evaluator ran {n} times for {calls} frames (once or never per frame)")
    top = _evalchain.top()
    if top in ("C", "D") and ran[top] != calls:
        problems.append(f"the interpreter's evaluator ({top}) ran {ran[top]} times for {calls} frames")
    active = sys.is_stack_trampoline_active()
    through = via_trampoline()
    if deactivated and through:
        problems.append("a Python frame ran through a trampoline after the trampoline was deactivated")
    if active and not through:
        problems.append("active, but a Python frame did not run through a trampoline")
    said.append(f"then f: {', '.join(k for k, n in ran.items() if n) or 'no evaluator of ours'} ran"
                f"{', trampoline active' if active else ''}")
    if active and backend is not None:
        path = f"/tmp/perf-{os.getpid()}.map" if backend == "perf" else f"/tmp/jit-{os.getpid()}.dump"
        try:
            with open(path, "rb") as fh:
                named = b"py::f:" in fh.read()
        except OSError:
            named = False
        if not named:
            problems.append(f"active ({backend}), but f is not named in {path}")
    return problems, "; ".join(said)
'''


def run_forked(seq, namespace):
    """Run one sequence in a forked child; its problems (a crash is one)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        status = 1
        try:
            signal.alarm(30)
            problems, _ = namespace["run"](seq, CALLS)
            os.write(write_end, "\n".join(problems).encode())
            status = 0
        except BaseException as exc:
            os.write(write_end, f"raised {type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(status)
    os.close(write_end)
    text = read_to_end(read_end).decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    remove_perf_files(pid)
    problems = [line for line in text.splitlines() if line]
    if os.WIFSIGNALED(status):
        problems.insert(0, describe_exit(-os.WTERMSIG(status)))
    elif os.WEXITSTATUS(status) != 0 and not problems:
        problems.append(describe_exit(os.WEXITSTATUS(status)))
    return problems


def run_fresh(seq, workdir):
    """Run one sequence in a new interpreter that then exits normally; (its problems, what happened)."""
    code = (CHILD + "\nproblems, said = run(%r, %d)\nprint('\\n'.join(problems))\n"
            "print(said, file=sys.stderr)\nsys.exit(1 if problems else 0)\n") % (seq, CALLS)
    env = dict(os.environ, PYTHONPATH=workdir)
    for name in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT"):
        env.pop(name, None)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        return ["hung (no exit in 120 s)"], "hung"
    problems = [line for line in proc.stdout.splitlines() if line]
    if proc.returncode < 0 or (proc.returncode != 0 and not problems):
        problems.insert(0, f"{describe_exit(proc.returncode)}: {proc.stderr.strip()[-300:]}")
        return problems, describe_exit(proc.returncode)
    return problems, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""


def main():
    if not hasattr(sys, "activate_stack_trampoline"):
        print("cannot check: this interpreter has no sys.activate_stack_trampoline()")
        return CANNOT_CHECK
    try:
        sys.activate_stack_trampoline("perf")
        sys.deactivate_stack_trampoline()
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"cannot check: the trampoline cannot be activated here: {exc}")
        return CANNOT_CHECK
    workdir = tempfile.mkdtemp()
    try:
        _, why = build_extension(EXTENSION, workdir, "_evalchain")
        if why:
            print(f"cannot check: {why}")
            return CANNOT_CHECK
        sys.path.insert(0, workdir)
        if sys.argv[1:2] == ["--describe"]:
            # What each order given does here, one line each (the series' READMEs tabulate it).
            for seq in sys.argv[2:]:
                found, said = run_fresh(seq, workdir)
                print(f"{seq}: {said}" + (f" -- PROBLEMS: {'; '.join(found)}" if found else ""))
            return 0
        namespace = {}
        exec(compile(CHILD, "<evalchain child>", "exec"), namespace)
        forked = ["".join(p) for n in range(1, FORKED_LENGTH + 1) for p in itertools.product(STEPS, repeat=n)]
        forked += [seq for seq in NAMED_ORDERS if len(seq) > FORKED_LENGTH]
        fresh = ["".join(p) for n in range(1, FRESH_LENGTH + 1) for p in itertools.product(STEPS, repeat=n)]
        fresh += NAMED_ORDERS
        failures = [(f"{seq} (forked)", found) for seq in forked if (found := run_forked(seq, namespace))]
        failures += [(f"{seq} (fresh interpreter)", found) for seq in fresh if (found := run_fresh(seq, workdir)[0])]
        print(f"{len(forked)} orders in forked children and {len(fresh)} in fresh interpreters; "
              f"{len(failures)} failed")
        problems = [f"{where}: " + "; ".join(found) for where, found in failures[:MAX_SHOWN]]
        if len(failures) > MAX_SHOWN:
            more = [where.split()[0] for where, _ in failures[MAX_SHOWN:]]
            problems.append(f"... and {len(more)} more: " + " ".join(more[:40]) + (" ..." if len(more) > 40 else ""))
        return finish(problems)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
