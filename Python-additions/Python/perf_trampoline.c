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
 * fork(), on the stack of the child that inherited it.  Arenas
 * are kept across deactivate/activate and reused.
 *
 * This file is shared by the 3.9 and 3.11 backports; version-specific glue
 * lives in Include/internal/pycore_perf_trampoline.h.
 */

/* The trampoline's evaluator runs for every Python frame and ends in a tail
   call: its common path must save nothing.
   Built with -mno-omit-leaf-frame-pointer (as builds for profiling are),
   GCC gives every leaf function a frame record, and on aarch64 it cannot
   move that record off the common path as it does on x86-64: each call
   then pays for the record and, with pac-ret, for signing the return
   address.  This file's leaf functions do without one: a sample in one of
   them misses its caller's C frame when perf unwinds by frame pointers,
   never a trampoline, so every py:: frame stays.  Set for the whole file
   before any include, so that the header functions it inlines are compiled
   with the same options (GCC does not inline across different ones). */
#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__)
#  pragma GCC target("omit-leaf-frame-pointer")
#endif
/* GCC has no target pragma on RISC-V (-momit-leaf-frame-pointer is an option
   of the command line there), so the evaluator, which ends in tail calls
   only, omits its frame record by an attribute of its own. */
#if defined(__riscv) && defined(__GNUC__) && !defined(__clang__)
#  define PERF_EVALUATOR_NO_FRAME __attribute__((optimize("omit-frame-pointer")))
#else
#  define PERF_EVALUATOR_NO_FRAME
#endif

#include "Python.h"
#include "pycore_initconfig.h"        // _PyStatus_OK()
#include "pycore_pystate.h"           // _PyInterpreterState_GET()
#include "pycore_perf_trampoline.h"

#ifndef MS_WINDOWS
#  include <fcntl.h>                  // open()
#  include <pthread.h>                // pthread_atfork()
#  include <sys/stat.h>               // fstat()
#  include <unistd.h>                 // getpid()
#endif
#include <stddef.h>                   // offsetof()
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
       one behind. */
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

/* Open (creating it if missing) one of the profiler's files in /tmp, whose
   names anyone can predict: never through a symbolic link, and only a
   regular file that belongs to this process's effective user and has no
   other name (a file created beforehand by another user would receive code
   addresses, and a hard link would let the dump's truncation reach another
   file).  The file is not truncated here: a caller that wants it empty
   truncates it after this check.  Returns the descriptor, or -1 with errno
   set (EPERM for a file that fails the check). */
int
_PyPerf_OpenOwnFile(const char *path, int flags)
{
#ifndef MS_WINDOWS
    flags |= O_CREAT | O_NOFOLLOW;
    flags &= ~O_TRUNC;
#ifdef O_CLOEXEC
    flags |= O_CLOEXEC;
#endif
    int fd = open(path, flags, 0600);
    if (fd < 0) {
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* Open one of the profiler's files again by its name, after its descriptor
   was closed or given to another file: never created, never followed
   through a symbolic link, close-on-exec, and never on descriptor 0, 1 or
   2 (the program may be about to give a standard stream a file of its own:
   daemons close them and open more).  The caller checks that it is still
   the same file.  Returns the descriptor, or -1 with errno set. */
int
_PyPerf_ReopenOwnFile(const char *path, int flags)
{
#ifndef MS_WINDOWS
    int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC);
#ifdef F_DUPFD_CLOEXEC
    if (fd >= 0 && fd <= 2) {
        int above = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        int err = errno;
        close(fd);
        errno = err;
        fd = above;
    }
#endif
    return fd;
#else
    errno = ENOSYS;
    return -1;
#endif
}

static PerfMapState perf_map_state;
static long perf_map_pid = -1;    // process that opened perf_map_state
#ifndef MS_WINDOWS
static dev_t perf_map_dev;        // the map's file, to tell it from another
static ino_t perf_map_ino;        // file given its descriptor's number later
static int perf_map_unterminated; // the map ends with a line cut short

/* Whether st is the map's file. */
static int
perf_map_is_map(const struct stat *st)
{
    return st->st_dev == perf_map_dev && st->st_ino == perf_map_ino;
}

/* Whether the map's descriptor still refers to the map (its stat in *st).
   A process may close descriptors it did not open (a forked child before
   exec() with os.closerange() or close_fds, a daemon detaching), and the
   number may then be given to another file, which must never receive a
   line, nor be closed by us. */
static int
perf_map_fd_is_map(struct stat *st)
{
    return fstat(fileno(perf_map_state.perf_map), st) == 0
           && perf_map_is_map(st);
}

/* The map's descriptor was closed, or its number now names another file:
   open the map again by its name, with the map lock held.  The old stream
   is left alone, never closed: its descriptor may be another file's now (it
   holds no data: lines are written with write(2)).  Nothing is created: a
   map that was removed or replaced meanwhile takes no more lines.  Returns
   0 with the map's stat in *st, or -1. */
static int
perf_map_reopen(struct stat *st)
{
    char filename[100];
    snprintf(filename, sizeof(filename), "/tmp/perf-%ld.map", perf_map_pid);
    int fd = _PyPerf_ReopenOwnFile(filename, O_WRONLY | O_APPEND);
    if (fd < 0) {
        return -1;
    }
    FILE *file = NULL;
    if (fstat(fd, st) == 0 && perf_map_is_map(st)) {
        file = fdopen(fd, "a");
    }
    if (file == NULL) {
        close(fd);
        return -1;
    }
    perf_map_state.perf_map = file;
    return 0;
}
#endif

static void perf_map_before_fork(void);
static void perf_map_after_fork_child(void);

int
PyUnstable_PerfMapState_Init(void)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map != NULL) {
        if (perf_map_pid == (long)getpid()) {
            return 0;    // already open for this process
        }
        // inherited through a fork() that did not go through
        // PyOS_AfterFork_Child() (a C extension's): the parent's
        perf_map_after_fork_child();
    }
    char filename[100];
    pid_t pid = getpid();
    snprintf(filename, sizeof(filename), "/tmp/perf-%jd.map", (intmax_t)pid);
    int fd = _PyPerf_OpenOwnFile(filename, O_WRONLY | O_APPEND);
    if (fd == -1) {
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        errno = err;
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
    static int before_fork_registered = 0;
    if (!before_fork_registered) {
        before_fork_registered = pthread_atfork(perf_map_before_fork,
                                                NULL, NULL) == 0;
    }
    perf_map_state.perf_map = file;
    perf_map_pid = (long)pid;
    perf_map_unterminated = 0;
    perf_map_dev = st.st_dev;
    perf_map_ino = st.st_ino;
#endif
    return 0;
}

/* Append data to the map with the map lock held, whole or not at all: a
   line cut short (a full disk, a file size limit) is cut off again, so that
   the next line is not glued to it; where it cannot be cut off, it is ended
   with a newline before the next line (perf reads it as one line more, at
   worst this code's address under a shortened name).  The map's stream is only a holder of the descriptor: nothing is
   ever buffered in it. */
static int
append_to_map(const char *data, size_t size)
{
    struct stat st;
    if (!perf_map_fd_is_map(&st) && perf_map_reopen(&st) < 0) {
        return -1;
    }
    int fd = fileno(perf_map_state.perf_map);
    if (perf_map_unterminated) {
        if (write(fd, "\n", 1) != 1) {
            return -1;
        }
        perf_map_unterminated = 0;
        st.st_size += 1;
    }
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int err = errno;
            if (p != data && ftruncate(fd, st.st_size) != 0) {
                perf_map_unterminated = 1;
            }
            errno = err;
            return -1;
        }
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

int
PyUnstable_WritePerfMapEntry(const void *code_addr, unsigned int code_size,
                             const char *entry_name)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map == NULL || perf_map_pid != (long)getpid()) {
        int ret = PyUnstable_PerfMapState_Init();
        if (ret != 0) {
            return ret;
        }
    }
    int size = snprintf(NULL, 0, "%" PRIxPTR " %x %s\n",
                        (uintptr_t)code_addr, code_size, entry_name);
    char *line = size > 0 ? PyMem_RawMalloc((size_t)size + 1) : NULL;
    if (line == NULL) {
        return -1;
    }
    snprintf(line, (size_t)size + 1, "%" PRIxPTR " %x %s\n",
             (uintptr_t)code_addr, code_size, entry_name);
    PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
    int result = append_to_map(line, (size_t)size);
    PyThread_release_lock(perf_map_state.map_lock);
    PyMem_RawFree(line);
    return result;
#else
    return 0;
#endif
}

void
PyUnstable_PerfMapState_Fini(void)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map != NULL && perf_map_pid != (long)getpid()) {
        perf_map_after_fork_child();    // the parent's: its lock may be held
    }
    if (perf_map_state.perf_map != NULL) {
        PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
        struct stat st;
        if (perf_map_fd_is_map(&st)) {
            fclose(perf_map_state.perf_map);
        }
        // else its descriptor is another file's now: leave the stream
        perf_map_state.perf_map = NULL;
        PyThread_release_lock(perf_map_state.map_lock);
        PyThread_free_lock(perf_map_state.map_lock);
        perf_map_state.map_lock = NULL;
        perf_map_pid = -1;
    }
#endif
}

/* Append the first `limit` bytes of parent_filename (all of it if limit is
   negative) to this process's map. */
static int
copy_perf_map_file(const char *parent_filename, long long limit)
{
#ifndef MS_WINDOWS
    FILE *from = fopen(parent_filename, "r");
    if (from == NULL) {
        return -1;
    }
    if (perf_map_state.perf_map == NULL || perf_map_pid != (long)getpid()) {
        int ret = PyUnstable_PerfMapState_Init();
        if (ret != 0) {
            fclose(from);
            return ret;
        }
    }
    char buf[4096];
    char last = '\n';
    int result = 0;
    PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
    while (limit != 0) {
        size_t want = sizeof(buf);
        if (limit > 0 && (unsigned long long)limit < want) {
            want = (size_t)limit;
        }
        size_t nread = fread(buf, 1, want, from);
        if (nread == 0) {
            if (ferror(from)) {
                result = -1;
            }
            break;
        }
        if (append_to_map(buf, nread) != 0) {
            result = -1;
            break;
        }
        last = buf[nread - 1];
        if (limit > 0) {
            limit -= (long long)nread;
        }
    }
    if (last != '\n') {
        // the copy ends inside a line: the next line starts a line of its own
        perf_map_unterminated = 1;
    }
    PyThread_release_lock(perf_map_state.map_lock);
    fclose(from);
    return result;
#else
    return 0;
#endif
}

int
PyUnstable_CopyPerfMapFile(const char *parent_filename)
{
    return copy_perf_map_file(parent_filename, -1);
}

/* What the map held at the last fork() (taken in the parent by a
   pthread_atfork() prepare handler, so it belongs to the very fork() a child
   comes from, whoever called it; read in the child): the process whose map
   it is and its size.  A child copies exactly that much: what the parent
   writes after fork() names the parent's new trampolines, at addresses the
   child hands out for code of its own. */
static struct {
    long map_pid;             // owner of the map file (-1: none open)
    long long map_size;
} map_at_fork = {-1, -1};

static void
perf_map_before_fork(void)
{
#ifndef MS_WINDOWS
    map_at_fork.map_pid = -1;
    map_at_fork.map_size = -1;
    if (perf_map_state.perf_map != NULL && perf_map_pid == (long)getpid()) {
        struct stat st;
        char filename[100];
        snprintf(filename, sizeof(filename), "/tmp/perf-%ld.map",
                 perf_map_pid);
        PyThread_acquire_lock(perf_map_state.map_lock, WAIT_LOCK);
        // By its name if the descriptor is no longer the map's.
        if (perf_map_fd_is_map(&st)
            || (stat(filename, &st) == 0 && perf_map_is_map(&st)))
        {
            map_at_fork.map_pid = perf_map_pid;
            map_at_fork.map_size = (long long)st.st_size;
        }
        PyThread_release_lock(perf_map_state.map_lock);
    }
#endif
}

/* In a forked child: start the child's own map as a copy of what the
   parent's held at fork(). */
static int
perf_map_copy_parent_map(void)
{
#ifndef MS_WINDOWS
    if (map_at_fork.map_pid < 0 || map_at_fork.map_size == 0) {
        // The parent had no map open, or an empty one: the child's starts empty.
        return PyUnstable_PerfMapState_Init();
    }
    char filename[100];
    snprintf(filename, sizeof(filename), "/tmp/perf-%ld.map",
             map_at_fork.map_pid);
    return copy_perf_map_file(filename, map_at_fork.map_size);
#else
    return 0;
#endif
}

/* After fork() the child owns a copy of the parent's FILE and lock.  The lock
   may have been held by a thread that does not exist in the child: drop both
   without touching the lock, so the child opens its own /tmp/perf-PID.map on
   its next write.  A descriptor that no longer refers to the map (its number
   went to another file) is left alone. */
static void
perf_map_after_fork_child(void)
{
#ifndef MS_WINDOWS
    if (perf_map_state.perf_map != NULL) {
        struct stat st;
        if (perf_map_fd_is_map(&st)) {
            fclose(perf_map_state.perf_map);   // holds no buffered data
        }
        perf_map_state.perf_map = NULL;
    }
    perf_map_state.map_lock = NULL;        // leaked on purpose (may be held)
    perf_map_pid = -1;
#endif
}


/* The trampoline's evaluator while the eval loop may run the frames it pushes
   itself through it (pycore_perf_trampoline.h); set where the evaluator is
   installed or removed.  Defined on every platform: the eval loop reads it. */
_PyFrameEvalFunction _PyPerf_TrampolineEvalFrame = NULL;

/* What the eval loop's frame records may name (pycore_perf_trampoline.h):
   nothing until refresh_frame_records() says so. */
_PyPerf_FrameRecordState _PyPerf_FrameRecords = {.index = -1, .gen = 0};

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <sys/mman.h>                 // mmap(), mprotect()

/* ---- C stack check -----------------------------------------------------
 *
 * Without an evaluator the eval loop runs a call of a Python function
 * inline (3.11), on no C stack of its own.  Under the trampoline every
 * Python frame is entered through its evaluator, in C frames of its own
 * (the evaluator's, the trampoline's, the eval loop's), so a recursion that
 * sys.setrecursionlimit() allows and the interpreter runs without the
 * trampoline could run the C stack out and end in SIGSEGV.  The evaluator
 * raises RecursionError instead of entering a frame when the C stack is
 * nearly full.  What is kept below that point (the margin) serves what
 * runs under the deepest frame entered: its eval loop, the C functions it
 * calls, raising the error.
 *
 * Each thread's stack bounds are read with pthread_getattr_np() at the
 * thread's first frame (once: for the main thread glibc reads
 * /proc/self/maps), and again when RLIMIT_STACK, from which glibc derives
 * the main thread's, has changed since (a program that raises it before
 * recursing is not held to the old one).  A stack pointer below those
 * bounds (a signal's alternate stack, a stack some library switched to) is
 * not checked, nor is anything where the bounds are unknown: musl gives
 * the main thread's mapped size, not its limit. */
#if defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__))
#  define PERF_C_STACK_CHECK

#include <stdint.h>                   // uintptr_t, UINTPTR_MAX
#include <sys/resource.h>             // getrlimit()

#if defined(__has_feature)
#  define PERF_HAS_FEATURE(x) __has_feature(x)
#else
#  define PERF_HAS_FEATURE(x) 0
#endif
/* The margin: at most a quarter of the stack (threading.stack_size()
   allows 32 KiB), and more under AddressSanitizer, whose C frames are
   larger. */
#if defined(__SANITIZE_ADDRESS__) || PERF_HAS_FEATURE(address_sanitizer)
#  define PERF_C_STACK_MARGIN (256 * 1024)
#else
#  define PERF_C_STACK_MARGIN (64 * 1024)
#endif
/* A main thread's stack that glibc reports as reaching up to the next
   mapping (RLIMIT_STACK unlimited, or raised past the room the kernel left
   below the stack when the program started) ends where the kernel's guard
   gap before that mapping begins (stack_guard_gap: 1 MiB by default).  A
   stack that large can spare it. */
#define PERF_C_STACK_LARGE (64 * 1024 * 1024)
#define PERF_C_STACK_GUARD_GAP (1024 * 1024)

/* Lowest stack address at which this thread's evaluator enters a frame:
   UINTPTR_MAX until the thread's bounds are read, 0 if they are unknown. */
static __thread uintptr_t c_stack_limit = UINTPTR_MAX;
static __thread uintptr_t c_stack_low;      // lowest address of the stack
static __thread rlim_t c_stack_rlimit;      // RLIMIT_STACK when read

static rlim_t
current_stack_rlimit(void)
{
    struct rlimit rl;
    return getrlimit(RLIMIT_STACK, &rl) == 0 ? rl.rlim_cur : RLIM_INFINITY;
}

static void
read_c_stack_bounds(void)
{
    c_stack_limit = 0;
    c_stack_low = 0;
    c_stack_rlimit = current_stack_rlimit();
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return;
    }
    void *addr;
    size_t size, guard;
    int err = pthread_attr_getstack(&attr, &addr, &size);
    err |= pthread_attr_getguardsize(&attr, &guard);
    pthread_attr_destroy(&attr);
    if (err != 0 || size <= guard) {
        return;
    }
    // Clear of the guard whether or not the bounds reported include it
    // (glibc's leave it out; older versions did not).
    size -= guard;
    size_t margin = PERF_C_STACK_MARGIN < size / 4 ? PERF_C_STACK_MARGIN
                                                   : size / 4;
    if (size >= PERF_C_STACK_LARGE) {
        margin += PERF_C_STACK_GUARD_GAP;
    }
    c_stack_low = (uintptr_t)addr + guard;
    c_stack_limit = c_stack_low + margin;
}

/* The stack pointer, read without making the caller set up a frame of its
   own (__builtin_frame_address() would). */
static inline uintptr_t
c_stack_pointer(void)
{
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__ ("movq %%rsp, %0" : "=r" (sp));
#elif defined(__aarch64__)
    __asm__ ("mov %0, sp" : "=r" (sp));
#elif defined(__riscv)
    __asm__ ("mv %0, sp" : "=r" (sp));
#elif defined(__powerpc64__)
    __asm__ ("mr %0, 1" : "=r" (sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0);
#endif
    return sp;
}

/* Whether the stack pointer is below this thread's limit (or the thread's
   bounds are not read yet): one comparison while the stack has room. */
static inline int
c_stack_near_end(void)
{
    return _PyPerf_UNLIKELY(c_stack_pointer() < c_stack_limit);
}

/* Returns 1 with RecursionError set if no frame is to be entered at here. */
static int
c_stack_exhausted(uintptr_t here)
{
    if (c_stack_limit == UINTPTR_MAX
        || (here >= c_stack_low && c_stack_rlimit != current_stack_rlimit()))
    {
        read_c_stack_bounds();
    }
    if (here >= c_stack_limit || here < c_stack_low) {
        return 0;
    }
    PyErr_SetString(PyExc_RecursionError,
                    "maximum recursion depth exceeded: the C stack is "
                    "nearly full; under the perf trampoline every Python "
                    "call is a C call");
    return 1;
}

static PyObject *py_trampoline_evaluator_slow(PyThreadState *,
                                              _PyPerf_Frame *, int);

/* py_trampoline_evaluator() where c_stack_near_end(): at a thread's first
   frame, near the end of its stack, or on another stack.  Out of line and
   reached by a tail call, so that the evaluator keeps nothing for it. */
static _PyPerf_NO_INLINE PyObject *
py_trampoline_evaluator_low_stack(PyThreadState *ts, _PyPerf_Frame *frame,
                                  int throwflag)
{
    if (c_stack_exhausted(c_stack_pointer())) {
        // Not entered: the frame stays its caller's to clear, as when the
        // eval loop raises RecursionError on entering it.
        return NULL;
    }
    return py_trampoline_evaluator_slow(ts, frame, throwflag);
}
#else
#  define c_stack_near_end() 0
#  define py_trampoline_evaluator_low_stack py_trampoline_evaluator_slow
#endif   /* PERF_C_STACK_CHECK */

/* The evaluator is passed last so that the three arguments it takes stay in
   their registers through the trampoline. */
typedef PyObject *(*py_evaluator)(PyThreadState *, _PyPerf_Frame *, int);
typedef PyObject *(*py_trampoline)(PyThreadState *, _PyPerf_Frame *, int,
                                   py_evaluator);

extern char _Py_trampoline_func_start[];   // Python/asm_trampoline.S
extern char _Py_trampoline_func_end[];
extern char _Py_trampoline_func_return[];  // where its call returns

typedef enum {
    PERF_STATUS_FAILED = -1,
    PERF_STATUS_NO_INIT = 0,
    PERF_STATUS_OK = 1,
} perf_status_t;

/* The outputs trampolines are published to.  The perf map is appended to
   and the jitdump is kept open for the whole life of a process, whichever
   backend is in use, so a trampoline published to one of them once stays
   published until the process forks (the child writes files of its own).
   Callbacks set by someone else get a new output on every start. */
typedef enum {
    OUTPUT_PERF_MAP = 0,
    OUTPUT_JITDUMP = 1,
    OUTPUT_OTHER = 2,
    N_OUTPUTS
} perf_output_t;

/* What a code object's co_extra slot holds while the trampoline knows it:
   its trampoline, how much room that trampoline's slot has, and for each
   output the generation it was published to.  One entry per code object for
   the life of the interpreter, whatever the backend: switching backends
   publishes the same trampoline again instead of taking a new co_extra index
   (CPython has 255; upstream takes one per activation).  When the code
   object is freed, an entry whose slot may serve again waits in
   perf.free_slots for a new code object; the others are freed. */
typedef struct code_entry {
    py_trampoline trampoline;
    size_t chunk_size;
    unsigned int published[N_OUTPUTS];
    struct code_entry *next_free;   // next in perf.free_slots
} code_entry_t;

/* The eval loop reads an entry's first members (_PyPerf_EntryHead). */
typedef char perf_entry_head_trampoline[
    offsetof(code_entry_t, trampoline)
    == offsetof(_PyPerf_EntryHead, trampoline) ? 1 : -1];
typedef char perf_entry_head_chunk_size[
    offsetof(code_entry_t, chunk_size)
    == offsetof(_PyPerf_EntryHead, chunk_size) ? 1 : -1];
typedef char perf_entry_head_published_map[
    offsetof(code_entry_t, published)
    + OUTPUT_PERF_MAP * sizeof(unsigned int)
    == offsetof(_PyPerf_EntryHead, published_map) ? 1 : -1];

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
    // co_extra index of the code entries in the main interpreter (the only
    // one the trampoline runs in: co_extra indices, like the frame
    // evaluator, belong to one interpreter each): taken at the first
    // activation and kept until the interpreter is finalized
    Py_ssize_t extra_code_index;
    code_arena_t *arena;      // newest arena; older ones through ->prev
    size_t code_size;         // bytes of the template
    _PyPerf_Callbacks requested;  // backend the next activation starts
    _PyPerf_Callbacks api;    // backend in use (valid while state_ready)
    void *state;
    int state_ready;
    perf_output_t output;     // output of the backend in use
    size_t chunk_size;        // trampoline slot size the backend needs
    size_t pending_padding;   // set by a starting backend's init_state
    unsigned int output_gen[N_OUTPUTS];   // current generation of each output
    long output_pid[N_OUTPUTS];           // process that output belongs to
    int persist_after_fork;
    int arena_failure_reported;
    int entry_not_written;    // set by a backend whose write failed
    // entries of freed code objects whose slot may serve a new one
    code_entry_t *free_slots;
    // PEP 523 evaluator installed when the trampoline was activated: the
    // trampolines call it, deactivation puts it back; NULL: none
    _PyFrameEvalFunction prev_eval;
    // The trampoline's evaluator was made the interpreter's and has not been
    // taken out since.  It may no longer be on top: an evaluator installed
    // over it (a debugger's, a JIT front end's) keeps it to call it.
    int in_eval_chain;
    // extra_code_index while every frame may take the evaluator's fast path
    // (active, with no evaluator found at activation to run), -1 otherwise:
    // one load tells the evaluator both, and a negative index finds no entry.
    Py_ssize_t fast_index;
    // The eval loop the trampolines call while no evaluator found at
    // activation is to run: _PyEval_EvalFrameDefault, or its entry with room
    // for frame records while records may be written (refresh_frame_records).
    _PyFrameEvalFunction fast_loop;
} perf = {
    .status = PERF_STATUS_NO_INIT,
    .extra_code_index = -1,
    .fast_index = -1,
    .fast_loop = _PyEval_EvalFrameDefault,
    .output_pid = {-1, -1, -1},
};

static PyObject *py_trampoline_evaluator(PyThreadState *, _PyPerf_Frame *,
                                         int);

/* Whether a trampoline's call returns where the eval loop's frame records
   say it does (_PyPerf_TRAMPOLINE_RETURN_OFFSET): no records otherwise. */
static int
frame_records_match_trampoline(void)
{
#ifdef _PyPerf_TRAMPOLINE_RETURN_OFFSET
    // Two labels of one assembly function, declared as distinct objects:
    // hidden from the optimizer, which would take their distance for
    // undefined.
    uintptr_t start = (uintptr_t)_Py_trampoline_func_start;
    uintptr_t ret = (uintptr_t)_Py_trampoline_func_return;
    __asm__("" : "+r"(start), "+r"(ret));
    return ret - start == _PyPerf_TRAMPOLINE_RETURN_OFFSET;
#else
    return 0;
#endif
}

/* Tell the eval loop's frame records what they may name, and choose the
   loop's entry the trampolines call: wherever the evaluator's fast path
   (perf.fast_index), the output in use or the perf map's generation
   changes.  Records only name trampolines published to the perf map. */
static void
refresh_frame_records(void)
{
    _PyFrameEvalFunction records_loop = NULL;
#ifdef _PyPerf_HAVE_FRAME_RECORDS_EVAL
    records_loop = _PyPerf_FrameRecordsEval;
#endif
    int on = records_loop != NULL && perf.fast_index >= 0
             && perf.output == OUTPUT_PERF_MAP
             && frame_records_match_trampoline();
    _PyPerf_FrameRecords.gen = perf.output_gen[OUTPUT_PERF_MAP];
    _PyPerf_FrameRecords.index = on ? perf.fast_index : -1;
    perf.fast_loop = on ? records_loop : _PyEval_EvalFrameDefault;
}

/* Take the trampoline's evaluator out of interp: put back the one it
   replaced (the default evaluator if none).  If another evaluator was
   installed over it, it cannot be taken out: the other one calls it, and it
   goes on handing every frame, untouched, to the evaluator it replaced, so
   that the chain under it stays whole. */
static void
remove_trampoline_evaluator(PyInterpreterState *interp)
{
    if (_PyInterpreterState_GetEvalFrameFunc(interp)
        == py_trampoline_evaluator)
    {
        _PyInterpreterState_SetEvalFrameFunc(
            interp, perf.prev_eval != NULL ? perf.prev_eval
                                           : _PyEval_EvalFrameDefault);
        perf.prev_eval = NULL;
        perf.in_eval_chain = 0;
    }
    _PyPerf_TrampolineEvalFrame = NULL;
    perf.fast_index = -1;
    refresh_frame_records();
}

/* Set an OSError (PermissionError for EACCES, ...) naming what failed. */
void
_PyPerf_SetOSError(int err, const char *what)
{
    PyObject *msg = PyUnicode_FromFormat("perf trampoline: %s: %s",
                                         what, strerror(err));
    if (msg == NULL) {
        return;
    }
    PyObject *args = Py_BuildValue("(iN)", err, msg);
    if (args != NULL) {
        PyErr_SetObject(PyExc_OSError, args);
        Py_DECREF(args);
    }
}

/* ---- perf map backend ---- */

/* Entries of the perf map that could not be written (a full disk, a file
   size limit, an I/O error).  Their code objects count as published all the
   same, so that they take the fast path instead of trying again on every
   call; the entries wait here, in order, and are written after the next
   entry the map takes (it has room again), or when the backend stops.  At
   most PERF_MAP_UNWRITTEN_MAX wait: beyond that an entry is dropped, and its
   code stays unnamed.  They belong to the process that failed to write
   them: a forked child that starts a map of its own publishes everything to
   it again, and drops them.  Used with the GIL held. */
typedef struct perf_map_unwritten {
    struct perf_map_unwritten *next;
    const void *code_addr;
    unsigned int code_size;
    char name[];
} perf_map_unwritten_t;

#define PERF_MAP_UNWRITTEN_MAX 1024

static struct {
    perf_map_unwritten_t *first;
    perf_map_unwritten_t **last_next;   // where the next one is linked
    size_t count;
    long pid;
} perf_map_unwritten = {NULL, &perf_map_unwritten.first, 0, -1};

static void
perf_map_keep_unwritten(const void *code_addr, unsigned int code_size,
                        const char *name)
{
    if (perf_map_unwritten.count >= PERF_MAP_UNWRITTEN_MAX) {
        return;
    }
    size_t size = strlen(name) + 1;
    perf_map_unwritten_t *item = PyMem_RawMalloc(sizeof(*item) + size);
    if (item == NULL) {
        return;
    }
    item->next = NULL;
    item->code_addr = code_addr;
    item->code_size = code_size;
    memcpy(item->name, name, size);
    *perf_map_unwritten.last_next = item;
    perf_map_unwritten.last_next = &item->next;
    perf_map_unwritten.count++;
    perf_map_unwritten.pid = (long)getpid();
}

/* Write the entries that wait, in order, until one fails (the map is still
   full: the rest go on waiting). */
static void
perf_map_write_unwritten(void)
{
    perf_map_unwritten_t *item;
    while ((item = perf_map_unwritten.first) != NULL
           && perf_map_unwritten.pid == (long)getpid())
    {
        if (PyUnstable_WritePerfMapEntry(item->code_addr, item->code_size,
                                         item->name) != 0)
        {
            return;
        }
        perf_map_unwritten.first = item->next;
        if (perf_map_unwritten.first == NULL) {
            perf_map_unwritten.last_next = &perf_map_unwritten.first;
        }
        perf_map_unwritten.count--;
        PyMem_RawFree(item);
    }
}

static void
perf_map_drop_unwritten(void)
{
    while (perf_map_unwritten.first != NULL) {
        perf_map_unwritten_t *item = perf_map_unwritten.first;
        perf_map_unwritten.first = item->next;
        PyMem_RawFree(item);
    }
    perf_map_unwritten.last_next = &perf_map_unwritten.first;
    perf_map_unwritten.count = 0;
    perf_map_unwritten.pid = -1;
}

static void *
perf_map_init_state(void)
{
    if (perf_map_unwritten.pid != (long)getpid()) {
        perf_map_drop_unwritten();    // a forked child's map starts anew
    }
    int ret = PyUnstable_PerfMapState_Init();
    if (ret != 0) {
        if (ret == -2) {
            PyErr_NoMemory();
        }
        else {
            _PyPerf_SetOSError(errno, errno == EPERM
                ? "can't use /tmp/perf-PID.map: it must be a regular file of "
                  "this user with no other name (made by someone else?)"
                : "can't open /tmp/perf-PID.map");
        }
        return NULL;
    }
    return &perf_map_state;
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
        if (PyUnstable_WritePerfMapEntry(code_addr, code_size, entry) != 0) {
            perf_map_keep_unwritten(code_addr, code_size, entry);
        }
        else if (perf_map_unwritten.first != NULL) {
            perf_map_write_unwritten();
        }
        PyMem_RawFree(entry);
    }
    Py_XDECREF(tofree1);
    Py_XDECREF(tofree2);
    if (entry == NULL) {
        _PyPerf_EntryNotWritten();
    }
}

static int
perf_map_free_state(void *state)
{
    perf_map_write_unwritten();    // a last try: the map may have room now
    // The map is appended to when it is opened again: nothing is lost.
    PyUnstable_PerfMapState_Fini();
    return 0;
}

_PyPerf_Callbacks _Py_perfmap_callbacks = {
    &perf_map_init_state,
    &perf_map_write_entry,
    &perf_map_free_state,
};

static perf_output_t
output_of(const _PyPerf_Callbacks *cb)
{
    if (cb->write_state == _Py_perfmap_callbacks.write_state) {
        return OUTPUT_PERF_MAP;
    }
    if (cb->write_state == _Py_perfmap_jit_callbacks.write_state) {
        return OUTPUT_JITDUMP;
    }
    return OUTPUT_OTHER;
}

/* ---- executable arenas ---- */

static size_t
template_size(void)
{
    return (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
}

#if defined(__powerpc64__)
#include <sys/auxv.h>                 // getauxval(), AT_DCACHEBSIZE

/* A cache block size the kernel gave in the auxiliary vector, or 16 bytes,
   less than any 64-bit PowerPC's: a smaller step than the real one only
   repeats an operation on a block. */
static uintptr_t
cache_block_size(unsigned long type)
{
    unsigned long size = getauxval(type);
    return size < 16 || (size & (size - 1)) != 0 ? 16 : size;
}

/* Power ISA, Book II, "instruction storage": the copies reach memory (dcbst
   on each data cache block, sync), the instruction cache forgets what it
   held there (icbi on each block, sync), and isync drops instructions
   fetched before.  Not __builtin___clear_cache(), which GCC expands to
   nothing on powerpc64le, nor libgcc's __clear_cache(), an empty function
   there.  Both instructions are loads for page protection: the pages may be
   read-only by now. */
static void
flush_icache_ppc64(char *begin, char *end)
{
    uintptr_t line = cache_block_size(AT_DCACHEBSIZE);
    for (uintptr_t p = (uintptr_t)begin & ~(line - 1); p < (uintptr_t)end;
         p += line) {
        __asm__ volatile ("dcbst 0, %0" : : "r" (p) : "memory");
    }
    __asm__ volatile ("sync" : : : "memory");
    line = cache_block_size(AT_ICACHEBSIZE);
    for (uintptr_t p = (uintptr_t)begin & ~(line - 1); p < (uintptr_t)end;
         p += line) {
        __asm__ volatile ("icbi 0, %0" : : "r" (p) : "memory");
    }
    __asm__ volatile ("sync\n\tisync" : : : "memory");
}
#endif

/* Map an arena of trampolines chunk_size bytes apart.  Returns NULL with an
   OSError set (naming the failed call and errno) if the system refuses. */
static code_arena_t *
new_code_arena(size_t chunk_size)
{
    size_t code_size = template_size();
    if (chunk_size < code_size || chunk_size > PERF_ARENA_SIZE) {
        PyErr_Format(PyExc_ValueError,
                     "perf trampoline: a trampoline slot of %zu bytes does "
                     "not fit an arena of %d bytes", chunk_size,
                     PERF_ARENA_SIZE);
        return NULL;
    }
    char *memory = mmap(NULL, PERF_ARENA_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        _PyPerf_SetOSError(errno, "can't map memory for trampolines (mmap)");
        return NULL;
    }
    size_t n_copies = PERF_ARENA_SIZE / chunk_size;
    for (size_t i = 0; i < n_copies; i++) {
        memcpy(memory + i * chunk_size, _Py_trampoline_func_start, code_size);
    }
    // Some systems forbid creating executable code at run time (SELinux
    // deny_execmem, PaX MPROTECT, ...).
    if (mprotect(memory, PERF_ARENA_SIZE, PROT_READ | PROT_EXEC) == -1) {
        int err = errno;
        munmap(memory, PERF_ARENA_SIZE);   // never executed: safe to unmap
        _PyPerf_SetOSError(err, "can't make trampolines executable "
                               "(mprotect PROT_READ|PROT_EXEC)");
        return NULL;
    }
#if defined(__aarch64__) || defined(__arm__) || defined(__arm64__) \
    || defined(__riscv)
    // The data cache holds the new code; make the instruction side see it.
    // (RISC-V: the builtin calls glibc's __riscv_flush_icache(); libgcc's
    // __clear_cache() would be an empty function there.)
    __builtin___clear_cache(memory, memory + PERF_ARENA_SIZE);
#elif defined(__powerpc64__)
    flush_icache_ppc64(memory, memory + PERF_ARENA_SIZE);
#endif
    code_arena_t *arena = PyMem_RawCalloc(1, sizeof(code_arena_t));
    if (arena == NULL) {
        munmap(memory, PERF_ARENA_SIZE);
        PyErr_NoMemory();
        return NULL;
    }
    arena->start_addr = memory;
    arena->current_addr = memory;
    arena->size = PERF_ARENA_SIZE;
    arena->size_left = n_copies * chunk_size;
    arena->chunk_size = chunk_size;
    arena->prev = perf.arena;
    perf.arena = arena;
    perf.code_size = code_size;
    return arena;
}

/* The newest arena laid out for chunk_size with a free slot, mapping one if
   there is none.  One arena of each slot size is filled at a time, so
   switching backends back and forth maps nothing new. */
static code_arena_t *
arena_with_room(size_t chunk_size)
{
    for (code_arena_t *a = perf.arena; a != NULL; a = a->prev) {
        if (a->chunk_size == chunk_size) {
            if (a->size_left >= chunk_size) {
                return a;
            }
            break;       // older arenas of this size are full too
        }
    }
    return new_code_arena(chunk_size);
}

static size_t
chunk_size_for(size_t padding)
{
    return (template_size() + padding + 15) & ~(size_t)15;
}

/* A fresh trampoline for the backend in use.  NULL with an exception set if
   no executable memory can be had. */
static py_trampoline
compile_trampoline(void)
{
    code_arena_t *arena = arena_with_room(perf.chunk_size);
    if (arena == NULL) {
        return NULL;
    }
    py_trampoline trampoline = (py_trampoline)(void *)arena->current_addr;
    arena->current_addr += arena->chunk_size;
    arena->size_left -= arena->chunk_size;
    return trampoline;
}

/* Whether the slot of a freed code object may serve another one: only if
   no output without timestamps named it.  perf inject names an address of
   the jitdump after the code loaded there last, so the dump may name a slot
   again; the perf map (or another tool's output) would name it twice for
   the whole recording.  The code in every slot is the same, so a frame of
   the freed code still returning through the slot runs on unharmed. */
static int
slot_reusable(const code_entry_t *entry)
{
    return entry->trampoline != NULL
           && entry->published[OUTPUT_PERF_MAP] == 0
           && entry->published[OUTPUT_OTHER] == 0;
}

static void
free_code_entry(void *ptr)
{
    code_entry_t *entry = ptr;
    if (entry == NULL) {
        return;     // CPython calls it for empty slots too
    }
    if (perf.extra_code_index != -1 && slot_reusable(entry)) {
        entry->next_free = perf.free_slots;
        perf.free_slots = entry;
        return;
    }
    PyMem_RawFree(entry);
}

/* An entry of a freed code object with a slot of chunk_size bytes, taken
   off the free list and cleared for a new code object; NULL if none. */
static code_entry_t *
reuse_free_slot(size_t chunk_size)
{
    for (code_entry_t **link = &perf.free_slots; *link != NULL;
         link = &(*link)->next_free)
    {
        code_entry_t *entry = *link;
        if (entry->chunk_size == chunk_size) {
            *link = entry->next_free;
            entry->next_free = NULL;
            memset(entry->published, 0, sizeof(entry->published));
            return entry;
        }
    }
    return NULL;
}

static void
drop_free_slots(void)
{
    while (perf.free_slots != NULL) {
        code_entry_t *next = perf.free_slots->next_free;
        PyMem_RawFree(perf.free_slots);
        perf.free_slots = next;
    }
}

/* Called with the evaluator's executable memory exhausted or refused while
   running: say so once and stop (nothing to publish to any more). */
static void
trampoline_failed_while_running(void)
{
    if (!perf.arena_failure_reported) {
        perf.arena_failure_reported = 1;
        _PyErr_WriteUnraisableMsg("in the perf trampoline; it is deactivated",
                                  NULL);
    }
    PyErr_Clear();
    perf.status = PERF_STATUS_FAILED;
    remove_trampoline_evaluator(_PyInterpreterState_GET());
}

/* Slow path of get_trampoline(): give co an entry, a trampoline with room
   for the backend in use, and publish it to that backend's output. */
static py_trampoline
publish_trampoline(PyCodeObject *co, code_entry_t *entry)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);     // may be called with an exception set
    py_trampoline result = NULL;
    if (entry == NULL) {
        entry = reuse_free_slot(perf.chunk_size);
        if (entry == NULL) {
            entry = PyMem_RawCalloc(1, sizeof(code_entry_t));
        }
        if (entry == NULL) {
            goto done;              // run untracked this time
        }
        if (_PyCode_SetExtra((PyObject *)co, perf.extra_code_index,
                             entry) < 0) {
            free_code_entry(entry);
            goto done;
        }
    }
    if (entry->trampoline == NULL || entry->chunk_size < perf.chunk_size) {
        // A trampoline laid out without the room this backend needs after
        // it (perf_jit) gets a new one; the old one stays mapped: it may be
        // on some C stack.
        py_trampoline fresh = compile_trampoline();
        if (fresh == NULL) {
            trampoline_failed_while_running();
            goto done;
        }
        entry->trampoline = fresh;
        entry->chunk_size = perf.chunk_size;
        memset(entry->published, 0, sizeof(entry->published));
    }
    perf.entry_not_written = 0;
    perf.api.write_state(perf.state, (const void *)entry->trampoline,
                         (unsigned int)perf.code_size, co);
    if (!perf.entry_not_written) {
        // Published: not again until the output changes (a backend whose
        // output failed says so too: it keeps the entry or takes no more).
        // Otherwise (out of memory) the next call tries again.
        entry->published[perf.output] = perf.output_gen[perf.output];
    }
    result = entry->trampoline;
done:
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return result;
}

/* Trampoline of a code object, published to the output in use.  Returns NULL
   (no exception set) if none can be had. */
static inline py_trampoline
get_trampoline(PyCodeObject *co)
{
    code_entry_t *entry = (code_entry_t *)_PyPerf_CodeExtra(
        co, perf.extra_code_index);
    if (entry != NULL
        && entry->published[perf.output] == perf.output_gen[perf.output])
    {
        return entry->trampoline;
    }
    return publish_trampoline(co, entry);
}

/* py_trampoline_evaluator() when the code object's trampoline is not
   published yet or an evaluator found at activation is to run: out of line,
   so that the evaluator itself, called for every frame, saves no registers
   and jumps straight into the trampoline. */
static _PyPerf_NO_INLINE PyObject *
py_trampoline_evaluator_slow(PyThreadState *ts, _PyPerf_Frame *frame,
                             int throwflag)
{
    _PyFrameEvalFunction next = perf.prev_eval != NULL
                                ? perf.prev_eval : perf.fast_loop;
    if (perf.status == PERF_STATUS_OK) {
        py_trampoline f = get_trampoline(_PyPerf_FRAME_CODE(frame));
        if (f != NULL) {
            return f(ts, frame, throwflag, next);
        }
    }
    return next(ts, frame, throwflag);
}

static PERF_EVALUATOR_NO_FRAME PyObject *
py_trampoline_evaluator(PyThreadState *ts, _PyPerf_Frame *frame, int throwflag)
{
    if (c_stack_near_end()) {
        return py_trampoline_evaluator_low_stack(ts, frame, throwflag);
    }
    code_entry_t *entry = (code_entry_t *)_PyPerf_CodeExtra(
        _PyPerf_FRAME_CODE(frame), perf.fast_index);
    if (entry != NULL
        && entry->published[perf.output] == perf.output_gen[perf.output])
    {
        return entry->trampoline(ts, frame, throwflag, perf.fast_loop);
    }
    return py_trampoline_evaluator_slow(ts, frame, throwflag);
}

/* Called by a backend's write_state when it could not take the entry (out
   of memory): the code object is published again on its next call.  Not for
   a failed write: that would be tried again on every call. */
void
_PyPerf_EntryNotWritten(void)
{
    perf.entry_not_written = 1;
}

/* Called by a backend's init_state: reserve `padding` bytes after each
   trampoline (the jitdump backend needs room for the unwinding data that
   perf inject maps after the code). */
void
_PyPerfTrampoline_SetCodePadding(size_t padding)
{
    perf.pending_padding = padding;
}

static int
is_ours(PyInterpreterState *interp)
{
    return _PyInterpreterState_GetEvalFrameFunc(interp)
           == py_trampoline_evaluator;
}

/* Whether activating would make the trampoline's evaluator and another one
   each call the other: the trampoline's is in the interpreter's chain of
   evaluators, but another one was installed over it since.  That one may
   keep the trampoline's to call it (most do); installed over it again, the
   trampoline's would call that one in turn, and every frame would recurse
   until the C stack ran out.  Whether it does cannot be seen from here, so
   activation is refused (with RuntimeError) until it is removed.  With the
   default evaluator on top, the chain holds neither. */
static int
would_call_itself(PyInterpreterState *interp)
{
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    return perf.in_eval_chain && cur != py_trampoline_evaluator
           && cur != _PyEval_EvalFrameDefault;
}

static int
has_foreign_hook(PyInterpreterState *interp)
{
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    return cur != _PyEval_EvalFrameDefault && cur != py_trampoline_evaluator;
}

static void
stop_backend(void)
{
    if (perf.state_ready) {
        perf.state_ready = 0;
        if (perf.api.free_state != NULL) {
            perf.api.free_state(perf.state);
        }
        perf.state = NULL;
    }
}

/* Start the requested backend, or leave everything as it was.

   The new backend's state and an arena with its slot size are made first;
   only when both exist is the old backend stopped and the new one put in
   its place.  Returns -1 with an exception set on failure. */
static int
start_backend(void)
{
    _PyPerf_Callbacks cb = perf.requested;
    perf.pending_padding = 0;
    void *state = NULL;
    if (cb.init_state != NULL) {
        state = cb.init_state();
        if (state == NULL && PyErr_Occurred()) {
            return -1;
        }
    }
    size_t chunk_size = chunk_size_for(perf.pending_padding);
    if (arena_with_room(chunk_size) == NULL) {
        if (cb.free_state != NULL) {
            cb.free_state(state);
        }
        return -1;
    }
    stop_backend();
    perf.api = cb;
    perf.state = state;
    perf.state_ready = 1;
    perf.chunk_size = chunk_size;
    perf.output = output_of(&cb);
    long pid = (long)getpid();
    if (perf.output == OUTPUT_OTHER || perf.output_pid[perf.output] != pid) {
        // A new file (first start in this process, or a forked child's own):
        // every code object is published to it again on its next call.
        perf.output_gen[perf.output]++;
        perf.output_pid[perf.output] = pid;
    }
    refresh_frame_records();
    return 0;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */


/* ------------------------------------------------------------------------
 * Internal API (names as upstream)
 */

int
_PyIsPerfTrampolineActive(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    // Deactivated under an evaluator installed over it, and put back on top
    // when that one was removed, the trampoline's evaluator only passes
    // frames on.
    return is_ours(_PyInterpreterState_GET())
           && perf.status == PERF_STATUS_OK;
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
    *callbacks = perf.requested;
#else
    memset(callbacks, 0, sizeof(*callbacks));
#endif
}

/* Select the backend the next activation starts.  Nothing is stopped here:
   the backend in use keeps running until a new one has started. */
int
_PyPerfTrampoline_SetCallbacks(_PyPerf_Callbacks *callbacks)
{
    if (callbacks == NULL) {
        return -1;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    perf.requested = *callbacks;
#endif
    return 0;
}

#ifdef PY_HAVE_PERF_TRAMPOLINE
/* -1 with RuntimeError set unless interp is the main interpreter. */
static int
refuse_outside_main_interpreter(PyInterpreterState *interp)
{
    if (interp != PyInterpreterState_Main()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "perf trampoline: can only be activated in the main "
                        "interpreter (co_extra indices and the frame "
                        "evaluator belong to one interpreter each)");
        return -1;
    }
    return 0;
}
#endif

int
_PyPerfTrampoline_Init(int activate)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    PyInterpreterState *interp = _PyInterpreterState_GET();
    if (interp != PyInterpreterState_Main()) {
        if (!activate) {
            return 0;    // never active here: nothing to deactivate
        }
        return refuse_outside_main_interpreter(interp);
    }
    if (!activate) {
        // A PEP 523 evaluator installed over the trampoline, or one the
        // trampoline ran, stays.
        remove_trampoline_evaluator(interp);
        perf.status = PERF_STATUS_NO_INIT;
        return 0;
    }
    if (would_call_itself(interp)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "perf trampoline: another frame evaluator (PEP 523) "
                        "was installed over the trampoline's and may call "
                        "it; activating again would put the trampoline's "
                        "over it, each calling the other: remove that "
                        "evaluator first");
        return -1;
    }
    if (perf.requested.write_state == NULL) {
        perf.requested = _Py_perfmap_callbacks;
    }
    if (perf.extra_code_index == -1) {
        // Once: the entries outlive activations and backend switches.
        Py_ssize_t index = _PyEval_RequestCodeExtraIndex(free_code_entry);
        if (index < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "perf trampoline: no code object extra index "
                            "left");
            return -1;
        }
        perf.extra_code_index = index;
    }
    if (!perf.state_ready
        || perf.requested.write_state != perf.api.write_state
        || perf.requested.init_state != perf.api.init_state
        || perf.requested.free_state != perf.api.free_state)
    {
        if (start_backend() < 0) {
            return -1;
        }
    }
    else if (arena_with_room(perf.chunk_size) == NULL) {
        return -1;    // executable memory refused since the last start
    }
    perf.status = PERF_STATUS_OK;
    perf.arena_failure_reported = 0;
    if (!is_ours(interp)) {
        // Run under a PEP 523 evaluator already present.
        perf.prev_eval = has_foreign_hook(interp)
                         ? _PyInterpreterState_GetEvalFrameFunc(interp) : NULL;
        _PyInterpreterState_SetEvalFrameFunc(interp, py_trampoline_evaluator);
        perf.in_eval_chain = 1;
        _PyPerf_AFTER_HOOK_INSTALLED();
    }
    _PyPerf_TrampolineEvalFrame = perf.prev_eval == NULL
                                  ? py_trampoline_evaluator : NULL;
    perf.fast_index = perf.prev_eval == NULL ? perf.extra_code_index : -1;
    refresh_frame_records();
#endif
    return 0;
}

int
_PyPerfTrampoline_Fini(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    remove_trampoline_evaluator(_PyInterpreterState_GET());
    perf.status = PERF_STATUS_NO_INIT;
    stop_backend();
    _PyPerfJit_CloseDump();
    // The interpreter goes away with its co_extra indices.
    perf.extra_code_index = -1;
    drop_free_slots();
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
PyUnstable_PerfTrampoline_CompileCode(PyCodeObject *co)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (perf.status == PERF_STATUS_OK && is_ours(_PyInterpreterState_GET())) {
        (void)get_trampoline(co);
    }
#endif
    return 0;
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
    perf_map_after_fork_child();
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* The free slots of the arenas inherited from the parent are the ones
       the parent goes on handing out for its own new code.  perf follows
       fork(): it resolves addresses in an arena the parent mapped with the
       parent's map, so a child function in such a slot would be reported
       under the parent's function there.  The child's new trampolines go to
       arenas it maps itself (resolved with its own map); the inherited ones
       stay mapped and in use, but give out no more slots. */
    for (code_arena_t *a = perf.arena; a != NULL; a = a->prev) {
        a->size_left = 0;
    }
    drop_free_slots();      // slots of those arenas too
    if (!perf.state_ready) {
        return _PyStatus_OK();
    }
    if (perf.persist_after_fork && perf.output == OUTPUT_PERF_MAP
        && perf_map_copy_parent_map() == 0)
    {
        /* Keep the inherited trampolines: the child's map starts as a copy of
           the parent's map as it was at fork(), so every entry published
           there stays published, and grows with the child's new code. */
        perf.output_pid[OUTPUT_PERF_MAP] = (long)getpid();
        // The map entries still waiting are the child's to write too.
        perf_map_unwritten.pid = (long)getpid();
        return _PyStatus_OK();
    }
    /* Start over in the child with files of its own (also when the parent's
       map could not be copied): the inherited trampolines are published to
       them again as the child calls them.  Nothing is unmapped: the child is
       itself running on inherited trampolines. */
    int was_active = _PyIsPerfTrampolineActive();
    stop_backend();     // the jitdump backend drops the parent's descriptor
    if (was_active) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        perf.requested = perf.api;
        if (_PyPerfTrampoline_Init(1) < 0) {
            PyErr_Clear();
            remove_trampoline_evaluator(_PyInterpreterState_GET());
            perf.status = PERF_STATUS_FAILED;
        }
        PyErr_Restore(et, ev, tb);
    }
#endif
    return _PyStatus_OK();
}


/* ------------------------------------------------------------------------
 * Startup (-X perf, PYTHONPERFSUPPORT, -X perf_jit, PYTHON_PERF_JIT_SUPPORT)
 */

void
_PyPerfTrampoline_InitFromConfig(int mode)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (mode == 0) {
        return;
    }
    _PyPerf_Callbacks *cb = (mode == 2) ? &_Py_perfmap_jit_callbacks
                                        : &_Py_perfmap_callbacks;
    if (_PyPerfTrampoline_SetCallbacks(cb) < 0
        || _PyPerfTrampoline_Init(1) < 0)
    {
        /* A profiling aid that cannot start (no executable memory, no
           writable /tmp) is no reason to refuse to run the program: say so
           once and run without it. */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        PyObject *text = ev != NULL ? PyObject_Str(ev) : NULL;
        const char *why = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
        PyErr_Clear();
        fprintf(stderr,
                "Python: warning: the perf trampoline (%s) could not be "
                "started, running without it: %s\n",
                mode == 2 ? "-X perf_jit, PYTHON_PERF_JIT_SUPPORT"
                          : "-X perf, PYTHONPERFSUPPORT",
                why != NULL ? why : "unknown error");
        fflush(stderr);
        Py_XDECREF(text);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
    }
#endif
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
    if (refuse_outside_main_interpreter(_PyInterpreterState_GET()) < 0) {
        // Refused before the backend request, the process's, is touched.
        return NULL;
    }
    _PyPerf_Callbacks previous = perf.requested;
    if (_PyPerfTrampoline_SetCallbacks(cb) < 0
        || _PyPerfTrampoline_Init(1) < 0)
    {
        // Nothing changed: the backend in use (if any) is still the one
        // the next activation without a switch would use.
        perf.requested = previous;
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

#ifdef PY_HAVE_PERF_TRAMPOLINE
#include "pycore_atomic.h"            // _Py_atomic_store_relaxed()
#include "pycore_interp.h"            // PyInterpreterState.ceval

/* ---- Switching the trampoline from outside the process ---------------------
 *
 *
 * A service that was started without -X perf cannot be restarted to be
 * profiled.  Calling sys.activate_stack_trampoline() in it with a debugger
 * (gdb's `call`, a ptrace injector) runs interpreter code at whatever
 * instruction the thread was stopped: in the middle of an allocation, with
 * the GIL held by another thread, inside the eval loop's own bookkeeping.
 * Here the debugger only leaves a request, which the interpreter carries out
 * itself at a safe point.
 *
 * _PyPerf_RemoteRequest() is what the debugger calls.  Like a signal handler
 * it takes no lock, allocates nothing and calls nothing that could: it stores
 * the request and sets the eval breaker, the flag the eval loop tests between
 * instructions.  The thread that next finds the flag set, holding the GIL in
 * the main interpreter, calls _PyPerf_HandleRemoteRequest(), which makes the
 * same call a Python program would (sys.activate_stack_trampoline(backend) or
 * sys.deactivate_stack_trampoline()), with the same checks and errors, and
 * publishes the outcome in _PyPerf_Remote for the debugger to read.
 *
 * Which thread acts: one that runs Python code.  The eval breaker of the main
 * thread is set (as for a signal), and that of the calling thread where it is
 * attached to the main interpreter; before 3.12 the breaker is the
 * interpreter's, seen by every thread.  A process whose threads all wait in
 * system calls acts when one of them runs Python code again.
 */


_PyPerf_RemoteState _PyPerf_Remote = {
    .magic = _PyPerf_REMOTE_MAGIC,
    .version = _PyPerf_REMOTE_VERSION,
};

/* Set while a thread carries out a request: a free-threaded build can have
 * two threads at the eval breaker at once, and the call can run code that
 * reaches the eval breaker again. */
static int handling;

static PyInterpreterState *
main_interpreter(void)
{
    return _PyRuntime.interpreters.main;
}

uint64_t
_PyPerf_RemoteRequest(int mode)
{
    if (mode != _PyPerf_REMOTE_OFF && mode != _PyPerf_REMOTE_PERF
        && mode != _PyPerf_REMOTE_PERF_JIT)
    {
        return 0;
    }
    PyInterpreterState *interp = main_interpreter();
    if (interp == NULL) {
        return 0;
    }
    __atomic_store_n(&_PyPerf_Remote.mode, mode, __ATOMIC_RELAXED);
    uint64_t number = __atomic_add_fetch(&_PyPerf_Remote.requested, 1,
                                         __ATOMIC_RELEASE);
    // Before 3.12 the eval breaker is the interpreter's: any thread running
    // Python code in it sees the flag.  It is computed again once the request
    // is handled (eval_frame_handle_pending()), as on Windows after a signal.
    _Py_atomic_store_relaxed(&interp->ceval.eval_breaker, 1);
    return number;
}

static void
set_message(const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof(_PyPerf_Remote.message)) {
        n = sizeof(_PyPerf_Remote.message) - 1;
        // not in the middle of a UTF-8 sequence
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80) {
            n--;
        }
    }
    memcpy(_PyPerf_Remote.message, text, n);
    _PyPerf_Remote.message[n] = '\0';
}

/* The exception set (cleared), and setting it back: one object from 3.12,
 * three before. */
typedef struct { PyObject *type, *value, *tb; } saved_exception;

static saved_exception
take_exception(void)
{
    saved_exception saved;
    PyErr_Fetch(&saved.type, &saved.value, &saved.tb);
    return saved;
}

static void
restore_exception(saved_exception saved)
{
    PyErr_Restore(saved.type, saved.value, saved.tb);
}

static PyObject *
exception_value(saved_exception *saved)
{
    PyErr_NormalizeException(&saved->type, &saved->value, &saved->tb);
    return saved->value;
}

/* "TypeName: text" of the exception set, which is cleared. */
static void
set_message_from_exception(void)
{
    saved_exception failure = take_exception();
    PyObject *value = exception_value(&failure);
    PyObject *text = NULL;
    if (value != NULL) {
        text = PyUnicode_FromFormat("%s: %S", Py_TYPE(value)->tp_name, value);
    }
    const char *utf8 = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    set_message(utf8 != NULL ? utf8 : "an exception that could not be shown");
    PyErr_Clear();
    Py_XDECREF(text);
    restore_exception(failure);
    PyErr_Clear();
}

/* sys.<name>(*args) as the sys module has it; NULL with an exception set. */
static PyObject *
call_sys(const char *name, const char *backend)
{
    PyObject *func = PySys_GetObject(name);       // borrowed
    if (func == NULL) {
        PyErr_Format(PyExc_RuntimeError, "sys.%s is missing", name);
        return NULL;
    }
    if (!PyCFunction_Check(func)) {
        PyErr_Format(PyExc_RuntimeError,
                     "sys.%s was replaced (by %.100s): not called", name,
                     Py_TYPE(func)->tp_name);
        return NULL;
    }
    if (backend != NULL) {
        return PyObject_CallFunction(func, "s", backend);
    }
    return PyObject_CallNoArgs(func);
}

void
_PyPerf_HandleRemoteRequest(PyThreadState *tstate)
{
    if (tstate->interp != main_interpreter()) {
        return;
    }
    if (_Py_IsFinalizing()) {
        return;
    }
    int expected = 0;
    if (!__atomic_compare_exchange_n(&handling, &expected, 1, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    {
        return;
    }
    uint64_t number = __atomic_load_n(&_PyPerf_Remote.requested,
                                      __ATOMIC_ACQUIRE);
    int mode = __atomic_load_n(&_PyPerf_Remote.mode, __ATOMIC_RELAXED);

    // The thread may be between an exception being set and its handling
    // (an eval breaker check in the middle of unwinding): keep it.
    saved_exception saved = take_exception();

    PyObject *res;
    if (mode == _PyPerf_REMOTE_OFF) {
        res = call_sys("deactivate_stack_trampoline", NULL);
    }
    else {
        res = call_sys("activate_stack_trampoline",
                       mode == _PyPerf_REMOTE_PERF ? "perf" : "perf_jit");
    }
    int result;
    if (res == NULL) {
        result = _PyPerf_REMOTE_FAILED;
        set_message_from_exception();
    }
    else {
        result = _PyPerf_REMOTE_DONE;
        Py_DECREF(res);
        set_message(mode == _PyPerf_REMOTE_OFF ? "off"
                    : mode == _PyPerf_REMOTE_PERF ? "perf" : "perf_jit");
    }
    int active = -1;
    PyObject *is_active = call_sys("is_stack_trampoline_active", NULL);
    if (is_active != NULL) {
        active = PyObject_IsTrue(is_active);
        Py_DECREF(is_active);
    }
    PyErr_Clear();

    restore_exception(saved);
    _PyPerf_Remote.result = result;
    _PyPerf_Remote.active = active;
    // last: the debugger reads the outcome once `handled` reaches its number
    __atomic_store_n(&_PyPerf_Remote.handled, number, __ATOMIC_RELEASE);
    __atomic_store_n(&handling, 0, __ATOMIC_RELEASE);
}
#endif  /* PY_HAVE_PERF_TRAMPOLINE */
