/* Internal interface of the perf profiler trampoline (backport).
 *
 * Upstream CPython (3.12+) keeps these declarations in pycore_ceval.h and its
 * state in _PyRuntime.ceval.perf.  The backport keeps its state private to
 * Python/perf_trampoline.c so that no runtime structure changes size, and
 * gathers the small amount of version-specific glue here, so that the same
 * Python/perf_trampoline.c and Python/perf_jit_trampoline.c build on 3.9,
 * 3.10 and 3.11.
 */
#ifndef Py_INTERNAL_PERF_TRAMPOLINE_H
#define Py_INTERNAL_PERF_TRAMPOLINE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* ---- version glue -------------------------------------------------------
 * _PyPerf_Frame: the frame type the PEP 523 eval hook receives.
 * _PyPerf_FRAME_CODE(frame): the code object executed by that frame.
 * _PyPerf_CODE_NAME(code): the name written to the map (co_qualname where it
 *     exists, i.e. 3.11+, else co_name).
 */
#if PY_VERSION_HEX >= 0x030B0000
#  include "pycore_frame.h"           // struct _PyInterpreterFrame
typedef struct _PyInterpreterFrame _PyPerf_Frame;
#  define _PyPerf_CODE_NAME(code) ((code)->co_qualname)
#else
#  include "frameobject.h"            // PyFrameObject
typedef PyFrameObject _PyPerf_Frame;
#  define _PyPerf_CODE_NAME(code) ((code)->co_name)
#endif
#define _PyPerf_FRAME_CODE(frame) ((frame)->f_code)

/* _PyPerf_AFTER_HOOK_INSTALLED(): run when the trampoline becomes the
 * frame evaluator.  3.11's specializer inlines Python __getitem__ calls
 * (BINARY_SUBSCR_GETITEM) without going through the evaluator; it refuses
 * to specialize them while a PEP 523 evaluator is set, and instructions
 * specialized before are made to deoptimize by invalidating the type
 * version tags they were specialized for (PyType_Modified() on object
 * reaches every type).  3.12+ checks the evaluator in the instruction
 * instead, and so does 3.11's with the series' 0006, which runs the frame
 * through the trampoline's own evaluator (_PyPerf_EvalLoopMayPushFrame()
 * below); before 3.11 nothing is inlined. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#  define _PyPerf_AFTER_HOOK_INSTALLED() PyType_Modified(&PyBaseObject_Type)
#else
#  define _PyPerf_AFTER_HOOK_INSTALLED() ((void)0)
#endif

/* _PyPerf_CodeExtra(code, index): what _PyCode_GetExtra() gives (NULL if
 * nothing is stored at index), read without a call: the trampoline's
 * evaluator does it for every frame.  co_extra has had this layout (the
 * private _PyCodeObjectExtra of Objects/codeobject.c) since PEP 523. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} _PyPerf_CodeExtraHolder;

static inline void *
_PyPerf_CodeExtra(PyCodeObject *code, Py_ssize_t index)
{
    _PyPerf_CodeExtraHolder *holder = (_PyPerf_CodeExtraHolder *)code->co_extra;
    // One unsigned compare for both bounds: a negative index is above any
    // size.
    if (holder == NULL || (size_t)holder->ce_size <= (size_t)index) {
        return NULL;
    }
    return holder->ce_extras[index];
}

#if defined(__GNUC__) || defined(__clang__)
#  define _PyPerf_NO_INLINE __attribute__((noinline))
#  define _PyPerf_UNLIKELY(cond) __builtin_expect(!!(cond), 0)
#else
#  define _PyPerf_NO_INLINE
#  define _PyPerf_UNLIKELY(cond) (cond)
#endif

/* The trampoline's frame evaluator while it is the interpreter's evaluator
 * and runs no other PEP 523 evaluator under it; NULL otherwise. */
extern _PyFrameEvalFunction _PyPerf_TrampolineEvalFrame;

#if PY_VERSION_HEX >= 0x030B0000
#  include "pycore_interp.h"          // PyInterpreterState.eval_frame
/* Whether 3.11's eval loop may push a Python frame itself (inlined calls,
 * CALL_PY_EXACT_ARGS, CALL_PY_WITH_DEFAULTS, BINARY_SUBSCR_GETITEM): with
 * no PEP 523 evaluator it runs the frame inline; under the trampoline's own
 * evaluator it runs the pushed frame through that evaluator, so that the
 * frame keeps its trampoline (patches/3.11, 0006).  Any other evaluator
 * sees every frame: those instructions take their generic paths.  3.9's
 * eval loop pushes no frame itself. */
static inline int
_PyPerf_EvalLoopMayPushFrame(PyInterpreterState *interp)
{
    _PyFrameEvalFunction eval_frame = interp->eval_frame;
    // Without an evaluator: one test and a branch not taken, as before
    if (_PyPerf_UNLIKELY(eval_frame != NULL)) {
        return eval_frame == _PyPerf_TrampolineEvalFrame;
    }
    return 1;
}
#endif

/* Perf frame records (3.11's Python/ceval.c built with Py_PERF_FRAME_RECORDS,
 * patches/3.11): the eval loop names a Python frame it runs inline under the
 * trampoline's evaluator by a frame record {previous record, the address the
 * frame's trampoline returns to}, instead of calling the trampoline.  What
 * it reads for that, set by Python/perf_trampoline.c under the GIL:
 *   index  the code entries' co_extra index while a record may be written
 *          (the trampoline's evaluator is on with no other evaluator to run,
 *          and the backend in use writes the perf map), -1 otherwise: perf
 *          map entries name the records, and perf_jit's jitdump describes
 *          real frames, which keep their C call;
 *   gen    the perf map's generation: a code object's trampoline is in the
 *          map when its entry's published_map equals it.
 * Hidden: the eval loop reads it for every frame it pushes, without a GOT
 * load in a shared libpython. */
typedef struct {
    Py_ssize_t index;
    unsigned int gen;
} _PyPerf_FrameRecordState;
#if defined(__GNUC__) || defined(__clang__)
__attribute__((visibility("hidden")))
#endif
extern _PyPerf_FrameRecordState _PyPerf_FrameRecords;

#if PY_VERSION_HEX >= 0x030B0000
/* The entry of 3.11's eval loop with room for frame records (Python/ceval.c),
 * which the trampolines call instead of _PyEval_EvalFrameDefault while
 * records may be written; NULL where ceval.c is built without them.  3.9's
 * eval loop pushes no frame itself and has none. */
#  define _PyPerf_HAVE_FRAME_RECORDS_EVAL 1
#  if defined(__GNUC__) || defined(__clang__)
__attribute__((visibility("hidden")))
#  endif
extern _PyFrameEvalFunction _PyPerf_FrameRecordsEval;
#endif

/* The first members of a code object's entry (perf_trampoline.c's
 * code_entry_t, which checks the layout). */
typedef struct {
    void *trampoline;
    size_t chunk_size;
    unsigned int published_map;
} _PyPerf_EntryHead;

/* Where in a trampoline its call returns to (Python/asm_trampoline.S,
 * _Py_trampoline_func_return; perf_trampoline.c writes no records unless
 * they agree): [endbr64,] push %rbp, mov %rsp,%rbp, call *%rcx. */
#if defined(__x86_64__)
#  if defined(__CET__) && (__CET__ & 1)
#    define _PyPerf_TRAMPOLINE_RETURN_OFFSET 10
#  else
#    define _PyPerf_TRAMPOLINE_RETURN_OFFSET 6
#  endif
#endif

/* ---- backends --------------------------------------------------------- */

/* Same shape as upstream's _PyPerf_Callbacks.  init_state returns NULL with
   an exception set when the backend cannot start (the activation then fails
   and nothing changes); the backends here return a non-NULL state. */
typedef struct {
    // Callback to initialize the trampoline state
    void* (*init_state)(void);
    // Callback to register every trampoline being created
    void (*write_state)(void* state, const void *code_addr,
                        unsigned int code_size, PyCodeObject* code);
    // Callback to free the trampoline state
    int (*free_state)(void* state);
} _PyPerf_Callbacks;

extern int _PyPerfTrampoline_SetCallbacks(_PyPerf_Callbacks *);
extern void _PyPerfTrampoline_GetCallbacks(_PyPerf_Callbacks *);
extern int _PyPerfTrampoline_Init(int activate);
extern int _PyPerfTrampoline_Fini(void);
extern void _PyPerfTrampoline_FreeArenas(void);
extern int _PyIsPerfTrampolineActive(void);
#ifdef PY_HAVE_PERF_TRAMPOLINE
extern void _PyPerfTrampoline_SetCodePadding(size_t padding);
#endif
extern PyStatus _PyPerfTrampoline_AfterFork_Child(void);

#ifdef PY_HAVE_PERF_TRAMPOLINE
extern _PyPerf_Callbacks _Py_perfmap_callbacks;
extern _PyPerf_Callbacks _Py_perfmap_jit_callbacks;
/* The jitdump stays open across backend switches (its free_state only
   pauses it, so that records written before a switch are kept); this ends
   it with a JIT_CODE_CLOSE record when the interpreter is finalized. */
extern void _PyPerfJit_CloseDump(void);
/* Set OSError(err, "perf trampoline: <what>: <strerror(err)>"). */
extern void _PyPerf_SetOSError(int err, const char *what);
/* Called by a backend's write_state when it could not take the entry (out
   of memory): the code object is then published again on its next call.
   A failed write is not reported so, or it would be tried on every call. */
extern void _PyPerf_EntryNotWritten(void);
#endif

/* Open one of the profiler's files in /tmp (created if missing, never
   truncated): -1 with errno EPERM unless it is a regular file of the
   effective user with one link, and never through a symbolic link. */
extern int _PyPerf_OpenOwnFile(const char *path, int flags);
/* Open it again by its name after its descriptor was lost (never created,
   never on 0-2): -1 with errno set.  The caller checks it is the same file. */
extern int _PyPerf_ReopenOwnFile(const char *path, int flags);

/* Start the trampoline selected at startup (mode 1: perf map, 2: perf_jit).
   Never fails: a trampoline that cannot start is reported with one warning
   line on stderr and the program runs without it. */
extern void _PyPerfTrampoline_InitFromConfig(int mode);

/* Implementations of sys.activate_stack_trampoline(),
   sys.deactivate_stack_trampoline() and sys.is_stack_trampoline_active(). */
extern PyObject *_PyPerfTrampoline_SysActivate(const char *backend);
extern PyObject *_PyPerfTrampoline_SysDeactivate(void);
extern PyObject *_PyPerfTrampoline_SysIsActive(void);

/* Helpers shared by the two backends: the UTF-8 form of a code object's
   name / filename.  Never fails and never leaves an exception set (nor
   disturbs one that is pending); names that are not valid UTF-8 (lone
   surrogates) are written with backslash escapes.  *tofree receives an
   object to release with Py_XDECREF after use. */
extern const char *_PyPerf_CodeStringUTF8(PyObject *str, PyObject **tofree);

#ifdef PY_HAVE_PERF_TRAMPOLINE
#include <stdint.h>               // uint64_t, int32_t

/* Switching the perf trampoline from outside the process (Python/perf_trampoline.c).
 *
 * A debugger attached to a running interpreter (gdb, as `python -m cpython_perf
 * activate` drives it) calls _PyPerf_RemoteRequest(mode) in one of its threads
 * at whatever instruction that thread was stopped: the function only stores
 * to this structure and sets eval-breaker bits, as a signal handler may.  The
 * interpreter acts on the request later, at a safe point (the eval breaker),
 * in a thread of the main interpreter that holds the GIL, as if that thread
 * had called sys.activate_stack_trampoline(); it then publishes the outcome
 * here, where the debugger reads it (/proc/PID/mem).  The layout is read from
 * outside: fields are only ever added at the end (`version` says which). */

#define _PyPerf_REMOTE_MAGIC "cpython-perf rq"   // 15 characters and the NUL
#define _PyPerf_REMOTE_VERSION 1

/* mode of a request */
#define _PyPerf_REMOTE_OFF 0          // sys.deactivate_stack_trampoline()
#define _PyPerf_REMOTE_PERF 1         // sys.activate_stack_trampoline("perf")
#define _PyPerf_REMOTE_PERF_JIT 2     // sys.activate_stack_trampoline("perf_jit")

/* result of the request last handled */
#define _PyPerf_REMOTE_DONE 0         // message: the backend now active, or "off"
#define _PyPerf_REMOTE_FAILED 1       // message: the exception the call raised

typedef struct {
    char magic[16];
    uint32_t version;
    int32_t mode;                 // of the newest request
    uint64_t requested;           // number of the newest request (0: none yet)
    uint64_t handled;             // number of the newest request handled
    int32_t result;               // of the request numbered `handled`
    int32_t active;               // sys.is_stack_trampoline_active() after it
    char message[240];            // UTF-8, NUL-terminated
} _PyPerf_RemoteState;

PyAPI_DATA(_PyPerf_RemoteState) _PyPerf_Remote;

/* Async-signal-safe: the number of the request, 0 if mode is not one of the
 * above or the runtime is not running. */
PyAPI_FUNC(uint64_t) _PyPerf_RemoteRequest(int mode);

/* Called at the eval breaker with the GIL held (or the thread attached, in a
 * free-threaded build) when _PyPerf_RemoteRequestPending(). */
extern void _PyPerf_HandleRemoteRequest(PyThreadState *tstate);

static inline int
_PyPerf_RemoteRequestPending(void)
{
    return __atomic_load_n(&_PyPerf_Remote.requested, __ATOMIC_ACQUIRE)
           != __atomic_load_n(&_PyPerf_Remote.handled, __ATOMIC_RELAXED);
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_PERF_TRAMPOLINE_H */
