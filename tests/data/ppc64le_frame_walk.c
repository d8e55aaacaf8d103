/* The ppc64le trampoline's frame, walked as the kernel's user call chain
 * walker (perf record -g) walks the ELFv2 back chain: from a frame's r1,
 * the caller's r1 is the doubleword at r1, and the return address into the
 * caller is the LR save doubleword of the caller's frame (16 bytes above
 * the caller's r1), where the callee stored it.  The trampoline is copied
 * into a page of its own, flushed from the instruction cache as
 * Python/perf_trampoline.c flushes its copies, and run from there.
 *
 * main -> call_it -> (the trampoline's copy) -> evaluator.  The evaluator
 * walks three frames and prints, one line each, the depth of the frame
 * whose return address is inside the copy and of the one whose return
 * address is inside call_it.  Then the trampoline is called directly, as
 * a function without a local entry point of the same module, which must
 * return with r2 (the TOC pointer) as it found it: the evaluator clobbers
 * r2, as one of another module does.  Exit 0 when call_it comes right
 * after the trampoline and r2 is kept, 1 otherwise. */
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

/* Walks from the frame whose r1 is sp. */
__attribute__((noinline)) static void
walk(uintptr_t sp)
{
    for (int depth = 0; depth < 3 && sp; depth++) {
        uintptr_t next_sp = ((uintptr_t *)sp)[0];
        if (!next_sp) {
            break;
        }
        uintptr_t ra = ((uintptr_t *)next_sp)[2];
        if (ra >= (uintptr_t)copy && ra < (uintptr_t)copy + copy_size) {
            trampoline_depth = depth;
        }
        else if (ra > (uintptr_t)call_it && ra < (uintptr_t)call_it + 256
                 && depth == trampoline_depth + 1) {
            caller_depth = depth;
        }
        sp = next_sp;
    }
}

/* Clobbers r2 as an evaluator of another module does (its global entry
 * point sets r2 to its own TOC pointer). */
__attribute__((noinline)) static long
eval(void *ts, void *frame, int throwflag)
{
    uintptr_t sp;
    __asm__ volatile ("mr %0, 1" : "=r" (sp));
    walk(sp);
    __asm__ volatile ("li 2, 0x5a" ::: "memory");
    return throwflag + 1;
}

/* The template itself, called by its symbol (a direct call: no r2 restore
 * after it). */
extern long trampoline_template(void *, void *, int, evaluator)
    __asm__("_Py_trampoline_func_start");

__attribute__((noinline)) static long
call_it(trampoline t)
{
    long r = t(0, 0, 41, eval);
    __asm__ volatile("" ::: "memory");   /* no tail call: call_it keeps its frame */
    return r;
}

__attribute__((noinline)) static int
keeps_toc(void)
{
    uintptr_t before, after;
    __asm__ volatile ("mr %0, 2" : "=r" (before));
    trampoline_template(0, 0, 0, eval);
    __asm__ volatile ("mr %0, 2" : "=r" (after));
    return before == after;
}

static void
flush(char *begin, char *end)
{
    for (char *p = begin; p < end; p += 16) {
        __asm__ volatile ("dcbst 0, %0" : : "r" (p) : "memory");
    }
    __asm__ volatile ("sync" : : : "memory");
    for (char *p = begin; p < end; p += 16) {
        __asm__ volatile ("icbi 0, %0" : : "r" (p) : "memory");
    }
    __asm__ volatile ("sync\n\tisync" : : : "memory");
}

int
main(void)
{
    copy_size = (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    copy = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memcpy(copy, _Py_trampoline_func_start, copy_size);
    if (mprotect(copy, 65536, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        return 2;
    }
    flush(copy, copy + copy_size);
    long result = call_it((trampoline)(void *)copy);
    printf("result %ld\ntrampoline %d\ncaller %d\n", result, trampoline_depth, caller_depth);
    fflush(stdout);   /* a template that loses r2 crashes below */
    int toc = keeps_toc();
    printf("toc %d\n", toc);
    return result == 42 && trampoline_depth == 0 && caller_depth == 1 && toc ? 0 : 1;
}
