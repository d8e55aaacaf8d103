/* The riscv64 trampoline's frame record, walked as the kernel's user call
 * chain walker (perf record -g) walks it: from s0, the previous s0 at s0-16
 * and the return address at s0-8.  The trampoline is copied into a page of
 * its own and run from there, as Python/perf_trampoline.c runs its copies.
 *
 * main -> call_it -> (the trampoline's copy) -> evaluator.  The evaluator
 * walks three records and prints, one line each, the depth of the record
 * whose return address is inside the copy and of the one whose return
 * address is inside call_it.  Exit 0 when call_it comes right after the
 * trampoline, 1 when the walk skips it (a trampoline without a record).
 * Built with -fno-omit-frame-pointer, linked with asm_trampoline.S. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

extern char _Py_trampoline_func_start[], _Py_trampoline_func_end[];
typedef long (*evaluator)(void *, void *, int);
typedef long (*trampoline)(void *, void *, int, evaluator);

static char *copy;
static size_t copy_size;
static volatile int trampoline_depth = -1, caller_depth = -1;
__attribute__((noinline)) static long call_it(trampoline t);

/* Walks from the record at fp; not inlined, so that eval calls it and
 * has a frame record of its own, as any evaluator that calls on has. */
__attribute__((noinline)) static void
walk(uintptr_t fp)
{
    for (int depth = 0; depth < 3 && fp; depth++) {
        uintptr_t ra = ((uintptr_t *)fp)[-1];
        if (ra >= (uintptr_t)copy && ra < (uintptr_t)copy + copy_size) {
            trampoline_depth = depth;
        }
        else if (ra > (uintptr_t)call_it && ra < (uintptr_t)call_it + 64
                 && depth == trampoline_depth + 1) {
            caller_depth = depth;
        }
        fp = ((uintptr_t *)fp)[-2];
    }
}

__attribute__((noinline)) static long
eval(void *ts, void *frame, int throwflag)
{
    walk((uintptr_t)__builtin_frame_address(0));
    return throwflag + 1;
}

__attribute__((noinline)) static long
call_it(trampoline t)
{
    long r = t(0, 0, 41, eval);
    __asm__ volatile("" ::: "memory");   /* no tail call: call_it keeps its frame */
    return r + 0 * caller_depth;
}

int
main(void)
{
    copy_size = (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    copy = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memcpy(copy, _Py_trampoline_func_start, copy_size);
    __builtin___clear_cache(copy, copy + copy_size);
    if (mprotect(copy, 4096, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        return 2;
    }
    long result = call_it((trampoline)(void *)copy);
    printf("result %ld\ntrampoline %d\ncaller %d\n", result, trampoline_depth, caller_depth);
    return result == 42 && trampoline_depth == 0 && caller_depth == 1 ? 0 : 1;
}
