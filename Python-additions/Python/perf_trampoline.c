/*
 * Perf profiler trampoline (backport of CPython 3.12's "perf trampoline").
 *
 * Native profilers such as Linux perf only see C frames.  Every Python call
 * runs the same C function (_PyEval_EvalFrameDefault), so the Python
 * functions cannot be told apart in their reports.  While the trampoline is
 * active, every evaluation of a Python frame goes through a small piece of
 * machine code that is unique to the frame's code object ("trampoline",
 * Python/asm_trampoline.S).  The address range of each trampoline is
 * published to the profiler together with the Python name of the code:
 *
 *   - backend "perf": one line per code object in /tmp/perf-PID.map
 *         <hex address> <hex size> py::<qualname>:<filename>
 *   - backend "perf_jit": a jitdump file, see Python/perf_jit_trampoline.c
 *
 * Mechanism:  the trampoline is installed as the interpreter's PEP 523 frame
 * evaluation function.  For each code object it reserves one copy of the
 * assembly template in an executable arena and remembers it in the code
 * object's co_extra slot; then it calls the copy, which calls
 * _PyEval_EvalFrameDefault with the original arguments.
 *
 * Executable memory: arenas are mapped read+write, filled with copies of the
 * template, then made read+execute (the instruction cache is flushed where
 * the architecture needs it).  Arenas are never unmapped while the process
 * runs: a trampoline may still be on the C stack of some thread - or, after
 * fork(), on the stack of the child that inherited it (gh-112367).  Arenas
 * are kept across deactivate/activate and reused.
 *
 * This file is shared by the 3.9 and 3.11 backports; version-specific glue
 * lives in Include/internal/pycore_perf_trampoline.h.
 */

#include "Python.h"
#include "pycore_initconfig.h"        // _PyStatus_OK()
#include "pycore_pystate.h"           // _PyInterpreterState_GET()
#include "pycore_perf_trampoline.h"

#ifndef MS_WINDOWS
#  include <fcntl.h>                  // open()
#  include <unistd.h>                 // getpid()
#endif
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Name helpers (shared with the jitdump backend)
 */

const char *
_PyPerf_CodeStringUTF8(PyObject *str, PyObject **tofree)
{
    *tofree = NULL;
    if (str == NULL || !PyUnicode_Check(str)) {
        return "";
    }
    /* Called while an exception may be pending (an exception thrown into a
       generator goes through the eval hook): keep it, and never leave a new
       one behind (gh-156114). */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    const char *res = PyUnicode_AsUTF8(str);
    if (res == NULL) {
        PyErr_Clear();
        /* Not valid UTF-8 (lone surrogates): write backslash escapes. */
        PyObject *bytes = PyUnicode_AsEncodedString(str, "utf-8",
                                                    "backslashreplace");
        if (bytes != NULL) {
            res = PyBytes_AS_STRING(bytes);
            *tofree = bytes;
        }
        else {
            PyErr_Clear();
            res = "";
        }
    }
    PyErr_Restore(et, ev, tb);
    return res;
}

/* ------------------------------------------------------------------------
 * Perf map file API: PyUnstable_PerfMapState_Init(),
 * PyUnstable_WritePerfMapEntry(), PyUnstable_PerfMapState_Fini() and
 * PyUnstable_CopyPerfMapFile(), as in CPython 3.12.  Usable by JITs and
 * extensions whether or not the trampoline is active.
 */

static PerfMapState perf_map_state;
static long perf_map_pid = -1;    // process that opened perf_map_state

int
PyUnstable_PerfMapState_Init(void)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map != NULL && perf_map_pid == (long)getpid()) {
        return 0;    // already open for this process
    }
    char filename[100];
    pid_t pid = getpid();
    // O_NOFOLLOW: never write through a symlink planted in /tmp.
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW;
#ifdef O_CLOEXEC
    flags |= O_CLOEXEC;
#endif
    snprintf(filename, sizeof(filename), "/tmp/perf-%jd.map", (intmax_t)pid);
    int fd = open(filename, flags, 0600);
    if (fd == -1) {
        return -1;
    }
    FILE *file = fdopen(fd, "a");
    if (file == NULL) {
        close(fd);
        return -1;
    }
    if (perf_map_state.map_lock == NULL) {
        perf_map_state.map_lock = PyThread_allocate_lock();
        if (perf_map_state.map_lock == NULL) {
            fclose(file);
            return -2;
        }
    }
    perf_map_state.perf_map = file;
    perf_map_pid = (long)pid;
#endif
    return 0;
}

int
PyUnstable_WritePerfMapEntry(const void *code_addr, unsigned int code_size,
                             const char *entry_name)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map == NULL) {
        int ret = PyUnstable_PerfMapState_Init();
        if (ret != 0) {
            return ret;
        }
    }
    PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
    fprintf(perf_map_state.perf_map, "%" PRIxPTR " %x %s\n",
            (uintptr_t)code_addr, code_size, entry_name);
    fflush(perf_map_state.perf_map);
    PyThread_release_lock(perf_map_state.map_lock);
#endif
    return 0;
}

void
PyUnstable_PerfMapState_Fini(void)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map != NULL) {
        PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
        fclose(perf_map_state.perf_map);
        perf_map_state.perf_map = NULL;
        PyThread_release_lock(perf_map_state.map_lock);
        PyThread_free_lock(perf_map_state.map_lock);
        perf_map_state.map_lock = NULL;
        perf_map_pid = -1;
    }
#endif
}

int
PyUnstable_CopyPerfMapFile(const char *parent_filename)
{
#ifndef MS_WINDOWS
    FILE *from = fopen(parent_filename, "r");
    if (from == NULL) {
        return -1;
    }
    if (perf_map_state.perf_map == NULL) {
        int ret = PyUnstable_PerfMapState_Init();
        if (ret != 0) {
            fclose(from);
            return ret;
        }
    }
    char buf[4096];
    int result = 0;
    PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
    for (;;) {
        size_t nread = fread(buf, 1, sizeof(buf), from);
        if (nread == 0) {
            if (ferror(from)) {
                result = -1;
            }
            break;
        }
        if (fwrite(buf, 1, nread, perf_map_state.perf_map) != nread) {
            result = -1;
            break;
        }
    }
    if (fflush(perf_map_state.perf_map) != 0) {
        result = -1;
    }
    PyThread_release_lock(perf_map_state.map_lock);
    fclose(from);
    return result;
#else
    return 0;
#endif
}

/* After fork() the child owns a copy of the parent's FILE and lock.  The lock
   may have been held by a thread that does not exist in the child: drop both
   without touching the lock, so the child opens its own /tmp/perf-PID.map on
   its next write. */
static void
perf_map_after_fork_child(void)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map != NULL) {
        fclose(perf_map_state.perf_map);   // buffer is empty: flushed per line
        perf_map_state.perf_map = NULL;
    }
    perf_map_state.map_lock = NULL;        // leaked on purpose (may be held)
    perf_map_pid = -1;
#endif
}


#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <sys/mman.h>                 // mmap(), mprotect()

/* The evaluator is passed last so that the three arguments it takes stay in
   their registers through the trampoline. */
typedef PyObject *(*py_evaluator)(PyThreadState *, _PyPerf_Frame *, int);
typedef PyObject *(*py_trampoline)(PyThreadState *, _PyPerf_Frame *, int,
                                   py_evaluator);

extern char _Py_trampoline_func_start[];   // Python/asm_trampoline.S
extern char _Py_trampoline_func_end[];

typedef enum {
    PERF_STATUS_FAILED = -1,
    PERF_STATUS_NO_INIT = 0,
    PERF_STATUS_OK = 1,
} perf_status_t;

typedef struct code_arena {
    char *start_addr;         // start of the mapping
    char *current_addr;       // next free trampoline slot
    size_t size;              // size of the mapping
    size_t size_left;         // bytes left from current_addr
    size_t chunk_size;        // distance between two trampolines
    struct code_arena *prev;  // older arena (kept: never unmapped)
} code_arena_t;

#define PERF_ARENA_SIZE (4096 * 16)

static struct {
    perf_status_t status;
    // co_extra index holding each code object's trampoline; -1 when a new
    // index is needed (first use, new backend, child after fork)
    Py_ssize_t extra_code_index;
    PyInterpreterState *extra_interp;   // interpreter the index belongs to
    code_arena_t *arena;
    size_t code_size;         // bytes of the template
    size_t code_padding;      // extra bytes the backend wants per trampoline
    _PyPerf_Callbacks api;
    void *state;
    int state_ready;
    int persist_after_fork;
} perf = {
    .status = PERF_STATUS_NO_INIT,
    .extra_code_index = -1,
};

static PyObject *py_trampoline_evaluator(PyThreadState *, _PyPerf_Frame *,
                                         int);

/* ---- perf map backend ---- */

static void *
perf_map_init_state(void)
{
    PyUnstable_PerfMapState_Init();
    return NULL;
}

static void
perf_map_write_entry(void *state, const void *code_addr,
                     unsigned int code_size, PyCodeObject *co)
{
    PyObject *tofree1, *tofree2;
    const char *name = _PyPerf_CodeStringUTF8(_PyPerf_CODE_NAME(co), &tofree1);
    const char *filename = _PyPerf_CodeStringUTF8(co->co_filename, &tofree2);
    size_t size = strlen(name) + strlen(filename) + sizeof("py:::");
    char *entry = PyMem_RawMalloc(size);
    if (entry != NULL) {
        snprintf(entry, size, "py::%s:%s", name, filename);
        PyUnstable_WritePerfMapEntry(code_addr, code_size, entry);
        PyMem_RawFree(entry);
    }
    Py_XDECREF(tofree1);
    Py_XDECREF(tofree2);
}

static int
perf_map_free_state(void *state)
{
    PyUnstable_PerfMapState_Fini();
    return 0;
}

_PyPerf_Callbacks _Py_perfmap_callbacks = {
    &perf_map_init_state,
    &perf_map_write_entry,
    &perf_map_free_state,
};

/* ---- executable arenas ---- */

static int
new_code_arena(void)
{
    size_t code_size = (size_t)(_Py_trampoline_func_end -
                                _Py_trampoline_func_start);
    size_t chunk_size = (code_size + perf.code_padding + 15) & ~(size_t)15;
    char *memory = mmap(NULL, PERF_ARENA_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        PyErr_SetFromErrno(PyExc_OSError);
        _PyErr_WriteUnraisableMsg(
            "Failed to create new mmap for perf trampoline", NULL);
        perf.status = PERF_STATUS_FAILED;
        return -1;
    }
    size_t n_copies = PERF_ARENA_SIZE / chunk_size;
    for (size_t i = 0; i < n_copies; i++) {
        memcpy(memory + i * chunk_size, _Py_trampoline_func_start, code_size);
    }
    // Some systems forbid creating executable code at run time.
    if (mprotect(memory, PERF_ARENA_SIZE, PROT_READ | PROT_EXEC) == -1) {
        PyErr_SetFromErrno(PyExc_OSError);
        munmap(memory, PERF_ARENA_SIZE);   // never executed: safe to unmap
        _PyErr_WriteUnraisableMsg(
            "Failed to set mmap for perf trampoline to PROT_READ | PROT_EXEC",
            NULL);
        perf.status = PERF_STATUS_FAILED;
        return -1;
    }
#if defined(__aarch64__) || defined(__arm__) || defined(__arm64__)
    // The data cache holds the new code; make the instruction side see it.
    __builtin___clear_cache(memory, memory + PERF_ARENA_SIZE);
#endif
    code_arena_t *arena = PyMem_RawCalloc(1, sizeof(code_arena_t));
    if (arena == NULL) {
        munmap(memory, PERF_ARENA_SIZE);
        PyErr_NoMemory();
        _PyErr_WriteUnraisableMsg(
            "Failed to allocate new code arena struct for perf trampoline",
            NULL);
        perf.status = PERF_STATUS_FAILED;
        return -1;
    }
    arena->start_addr = memory;
    arena->current_addr = memory;
    arena->size = PERF_ARENA_SIZE;
    arena->size_left = n_copies * chunk_size;
    arena->chunk_size = chunk_size;
    arena->prev = perf.arena;
    perf.arena = arena;
    perf.code_size = code_size;
    return 0;
}

static py_trampoline
compile_trampoline(void)
{
    code_arena_t *arena = perf.arena;
    size_t wanted = (perf.code_size + perf.code_padding + 15) & ~(size_t)15;
    if (arena == NULL || arena->size_left < arena->chunk_size
        || arena->chunk_size != wanted)
    {
        // (a backend with another padding starts a new arena; the rest of
        // the old one stays unused but mapped)
        if (new_code_arena() < 0) {
            return NULL;
        }
        arena = perf.arena;
    }
    py_trampoline trampoline = (py_trampoline)(void *)arena->current_addr;
    arena->current_addr += arena->chunk_size;
    arena->size_left -= arena->chunk_size;
    return trampoline;
}

/* Trampoline of a code object, creating and publishing it on first use.
   Returns NULL (no exception set) if none can be had. */
static py_trampoline
get_trampoline(PyCodeObject *co)
{
    void *f = NULL;
    if (_PyCode_GetExtra((PyObject *)co, perf.extra_code_index, &f) == 0
        && f != NULL)
    {
        return (py_trampoline)f;
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);     // may be called with an exception set
    py_trampoline new_trampoline = compile_trampoline();
    if (new_trampoline != NULL) {
        if (_PyCode_SetExtra((PyObject *)co, perf.extra_code_index,
                             (void *)new_trampoline) < 0) {
            new_trampoline = NULL;  // slot wasted; run untracked this time
        }
        else {
            perf.api.write_state(perf.state, (const void *)new_trampoline,
                                 (unsigned int)perf.code_size, co);
        }
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return new_trampoline;
}

static PyObject *
py_trampoline_evaluator(PyThreadState *ts, _PyPerf_Frame *frame, int throwflag)
{
    if (perf.status == PERF_STATUS_OK) {
        py_trampoline f = get_trampoline(_PyPerf_FRAME_CODE(frame));
        if (f != NULL) {
            return f(ts, frame, throwflag, _PyEval_EvalFrameDefault);
        }
    }
    return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

int
PyUnstable_PerfTrampoline_CompileCode(PyCodeObject *co)
{
    if (perf.status != PERF_STATUS_OK) {
        return 0;
    }
    get_trampoline(co);
    return 0;
}

static void
free_backend_state(void)
{
    if (perf.state_ready) {
        perf.state_ready = 0;
        if (perf.api.free_state != NULL) {
            perf.api.free_state(perf.state);
        }
        perf.state = NULL;
        // Code objects that already have a trampoline were published to the
        // old backend only: use fresh trampolines from now on.
        perf.extra_code_index = -1;
    }
}

/* Called by a backend's init_state: reserve `padding` bytes after each
   trampoline (the jitdump backend needs room for the unwinding data that
   perf inject maps after the code). */
void
_PyPerfTrampoline_SetCodePadding(size_t padding)
{
    perf.code_padding = padding;
}

static int
is_ours(PyInterpreterState *interp)
{
    return _PyInterpreterState_GetEvalFrameFunc(interp)
           == py_trampoline_evaluator;
}

static int
has_foreign_hook(PyInterpreterState *interp)
{
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    return cur != _PyEval_EvalFrameDefault && cur != py_trampoline_evaluator;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */


/* ------------------------------------------------------------------------
 * Internal API (names as upstream)
 */

int
_PyIsPerfTrampolineActive(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    return is_ours(_PyInterpreterState_GET());
#else
    return 0;
#endif
}

void
_PyPerfTrampoline_GetCallbacks(_PyPerf_Callbacks *callbacks)
{
    if (callbacks == NULL) {
        return;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    *callbacks = perf.api;
#else
    memset(callbacks, 0, sizeof(*callbacks));
#endif
}

int
_PyPerfTrampoline_SetCallbacks(_PyPerf_Callbacks *callbacks)
{
    if (callbacks == NULL) {
        return -1;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    free_backend_state();
    perf.api = *callbacks;
#endif
    return 0;
}

int
_PyPerfTrampoline_Init(int activate)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    PyInterpreterState *interp = _PyInterpreterState_GET();
    if (has_foreign_hook(interp)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Trampoline cannot be initialized as a custom eval "
                        "frame is already present");
        return -1;
    }
    if (!activate) {
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
        perf.status = PERF_STATUS_NO_INIT;
        return 0;
    }
    if (perf.api.write_state == NULL) {
        perf.api = _Py_perfmap_callbacks;
    }
    if (perf.extra_code_index == -1 || perf.extra_interp != interp) {
        Py_ssize_t index = _PyEval_RequestCodeExtraIndex(NULL);
        if (index < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "perf trampoline: no code object extra index "
                            "left");
            return -1;
        }
        perf.extra_code_index = index;
        perf.extra_interp = interp;
    }
    if (!perf.state_ready) {
        perf.code_padding = 0;
        perf.state = perf.api.init_state ? perf.api.init_state() : NULL;
        perf.state_ready = 1;
    }
    if (perf.arena == NULL && new_code_arena() < 0) {
        return -1;
    }
    perf.status = PERF_STATUS_OK;
    if (!is_ours(interp)) {
        _PyInterpreterState_SetEvalFrameFunc(interp, py_trampoline_evaluator);
        _PyPerf_AFTER_HOOK_INSTALLED();
    }
#endif
    return 0;
}

int
_PyPerfTrampoline_Fini(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    PyInterpreterState *interp = _PyInterpreterState_GET();
    if (is_ours(interp)) {
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    }
    perf.status = PERF_STATUS_NO_INIT;
    free_backend_state();
    perf.extra_code_index = -1;
    perf.extra_interp = NULL;
#endif
    return 0;
}

void
_PyPerfTrampoline_FreeArenas(void)
{
    /* Deliberately a no-op: trampolines may still be on some C stack (other
       threads, a forked child); the arenas stay mapped and are reused if the
       runtime is initialized again. */
}

int
PyUnstable_PerfTrampoline_SetPersistAfterFork(int enable)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    perf.persist_after_fork = enable;
    return perf.persist_after_fork;
#else
    return 0;
#endif
}

PyStatus
_PyPerfTrampoline_AfterFork_Child(void)
{
    long parent_map_pid = perf_map_pid;
    perf_map_after_fork_child();
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (!perf.state_ready) {
        return _PyStatus_OK();
    }
    if (perf.persist_after_fork
        && perf.api.write_state == _Py_perfmap_callbacks.write_state)
    {
        /* Keep the inherited trampolines: the child's map starts as a copy of
           the parent's map and grows with the child's new code. */
        char filename[100];
        snprintf(filename, sizeof(filename), "/tmp/perf-%ld.map",
                 parent_map_pid >= 0 ? parent_map_pid : (long)getppid());
        if (PyUnstable_CopyPerfMapFile(filename) != 0) {
            return _PyStatus_ERR("Failed to copy perf map file.");
        }
        return _PyStatus_OK();
    }
    /* Start over in the child: its own map / jitdump file and fresh
       trampolines for every code object it runs.  Nothing is unmapped: the
       child is itself running on inherited trampolines. */
    int was_active = _PyIsPerfTrampolineActive();
    perf.state_ready = 0;          // inherited state: let the backend reset
    if (perf.api.free_state != NULL) {
        perf.api.free_state(perf.state);
    }
    perf.state = NULL;
    perf.extra_code_index = -1;
    if (was_active) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (_PyPerfTrampoline_Init(1) < 0) {
            PyErr_Clear();
            _PyInterpreterState_SetEvalFrameFunc(_PyInterpreterState_GET(),
                                                 _PyEval_EvalFrameDefault);
            perf.status = PERF_STATUS_FAILED;
        }
        PyErr_Restore(et, ev, tb);
    }
#else
    (void)parent_map_pid;
#endif
    return _PyStatus_OK();
}


/* ------------------------------------------------------------------------
 * Startup (-X perf, PYTHONPERFSUPPORT, -X perf_jit, PYTHON_PERF_JIT_SUPPORT)
 */

int
_PyPerfTrampoline_InitFromConfig(int mode)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (mode == 0) {
        return 0;
    }
    _PyPerf_Callbacks *cb = (mode == 2) ? &_Py_perfmap_jit_callbacks
                                        : &_Py_perfmap_callbacks;
    if (_PyPerfTrampoline_SetCallbacks(cb) < 0
        || _PyPerfTrampoline_Init(1) < 0)
    {
        return -1;
    }
#endif
    return 0;
}


/* ------------------------------------------------------------------------
 * sys module functions
 */

PyObject *
_PyPerfTrampoline_SysActivate(const char *backend)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    _PyPerf_Callbacks *cb;
    if (strcmp(backend, "perf") == 0) {
        cb = &_Py_perfmap_callbacks;
    }
    else if (strcmp(backend, "perf_jit") == 0) {
        cb = &_Py_perfmap_jit_callbacks;
    }
    else {
        PyErr_Format(PyExc_ValueError, "invalid backend: %s", backend);
        return NULL;
    }
    if (perf.api.write_state != cb->write_state) {
        if (_PyPerfTrampoline_SetCallbacks(cb) < 0) {
            PyErr_SetString(PyExc_ValueError,
                            cb == &_Py_perfmap_callbacks
                            ? "can't activate perf trampoline"
                            : "can't activate perf jit trampoline");
            return NULL;
        }
    }
    if (_PyPerfTrampoline_Init(1) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
#else
    PyErr_SetString(PyExc_ValueError, "perf trampoline not available");
    return NULL;
#endif
}

PyObject *
_PyPerfTrampoline_SysDeactivate(void)
{
    if (_PyPerfTrampoline_Init(0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *
_PyPerfTrampoline_SysIsActive(void)
{
    if (_PyIsPerfTrampolineActive()) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}
