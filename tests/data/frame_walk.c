/* A trampoline's frame, walked as the kernel's user call chain walker
 * (perf record -g) walks the arch's frames:
 *
 * - riscv64: from s0, the previous s0 at s0-16 and the return address at
 *   s0-8 (the record GCC builds with -fno-omit-frame-pointer);
 * - ppc64le: the ELFv2 back chain: the doubleword at a frame's r1 is the
 *   caller's r1, and the return address into the caller is in the caller's
 *   LR save doubleword (its r1 + 16), where the callee stored it.
 *
 * The trampoline is copied into a page of its own, flushed from the
 * instruction cache, and run from there, as Python/perf_trampoline.c runs
 * its copies.  main -> call_it -> (the trampoline's copy) -> evaluator.  The
 * evaluator walks three frames; the program prints, one line each, the
 * depth of the frame whose return address is inside the copy and of the one
 * whose return address is inside call_it.  On ppc64le it then calls the
 * template directly, as a function of the same module without a local entry
 * point, which must return with r2 (the TOC pointer) as it found it although
 * the evaluator clobbers r2, as one of another module does ("toc 1").  Exit
 * 0 when call_it comes right after the trampoline (and r2 is kept), 1
 * otherwise.  Built with -fno-omit-frame-pointer, linked with the
 * trampoline's assembly. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#if !(defined(__riscv) && __riscv_xlen == 64) && !defined(__powerpc64__)
#  error "frame_walk.c walks riscv64 and ppc64le frames"
#endif

extern char _Py_trampoline_func_start[], _Py_trampoline_func_end[];
typedef long (*evaluator)(void *, void *, int);
typedef long (*trampoline)(void *, void *, int, evaluator);

#define PAGE 65536                 /* ppc64el's kernel pages; riscv64 maps 16 of its own */

static char *copy;
static size_t copy_size;
static volatile int trampoline_depth = -1, caller_depth = -1;
__attribute__((noinline)) static long call_it(trampoline t);

/* The return address of the frame at fp, and the next frame's address. */
static uintptr_t
step(uintptr_t fp, uintptr_t *ra)
{
#if defined(__riscv)
    *ra = ((uintptr_t *)fp)[-1];
    return ((uintptr_t *)fp)[-2];
#else
    uintptr_t next = ((uintptr_t *)fp)[0];
    *ra = next ? ((uintptr_t *)next)[2] : 0;
    return next;
#endif
}

/* Walks from the frame at fp: not inlined, so that eval has a frame of its
 * own, as any evaluator that calls on has. */
__attribute__((noinline)) static void
walk(uintptr_t fp)
{
    for (int depth = 0; depth < 3 && fp; depth++) {
        uintptr_t ra;
        uintptr_t next = step(fp, &ra);
        if (ra >= (uintptr_t)copy && ra < (uintptr_t)copy + copy_size) {
            trampoline_depth = depth;
        }
        else if (ra > (uintptr_t)call_it && ra < (uintptr_t)call_it + 256
                 && depth == trampoline_depth + 1) {
            caller_depth = depth;
        }
        fp = next;
    }
}

__attribute__((noinline)) static long
eval(void *ts, void *frame, int throwflag)
{
    uintptr_t fp;
#if defined(__riscv)
    fp = (uintptr_t)__builtin_frame_address(0);
#else
    __asm__ volatile ("mr %0, 1" : "=r" (fp));
#endif
    walk(fp);
#if defined(__powerpc64__)
    __asm__ volatile ("li 2, 0x5a" ::: "memory");   /* another module's TOC */
#endif
    return throwflag + 1;
}

__attribute__((noinline)) static long
call_it(trampoline t)
{
    long r = t(0, 0, 41, eval);
    __asm__ volatile("" ::: "memory");   /* no tail call: call_it keeps its frame */
    return r;
}

static void
flush(char *begin, char *end)
{
#if defined(__riscv)
    __builtin___clear_cache(begin, end);
#else
    for (char *p = begin; p < end; p += 16) {
        __asm__ volatile ("dcbst 0, %0" : : "r" (p) : "memory");
    }
    __asm__ volatile ("sync" : : : "memory");
    for (char *p = begin; p < end; p += 16) {
        __asm__ volatile ("icbi 0, %0" : : "r" (p) : "memory");
    }
    __asm__ volatile ("sync\n\tisync" : : : "memory");
#endif
}

#if defined(__powerpc64__)
/* The template itself, called by its symbol (a direct call: no r2 restore
 * after it). */
extern long trampoline_template(void *, void *, int, evaluator)
    __asm__("_Py_trampoline_func_start");

__attribute__((noinline)) static int
keeps_toc(void)
{
    uintptr_t before, after;
    __asm__ volatile ("mr %0, 2" : "=r" (before));
    trampoline_template(0, 0, 0, eval);
    __asm__ volatile ("mr %0, 2" : "=r" (after));
    return before == after;
}
#endif

int
main(void)
{
    copy_size = (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    copy = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    memcpy(copy, _Py_trampoline_func_start, copy_size);
    flush(copy, copy + copy_size);
    if (mprotect(copy, PAGE, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        return 2;
    }
    long result = call_it((trampoline)(void *)copy);
    printf("result %ld\ntrampoline %d\ncaller %d\n", result, trampoline_depth, caller_depth);
    int ok = result == 42 && trampoline_depth == 0 && caller_depth == 1;
#if defined(__powerpc64__)
    fflush(stdout);   /* a template that loses r2 crashes below */
    int toc = keeps_toc();
    printf("toc %d\n", toc);
    ok = ok && toc;
#endif
    return ok ? 0 : 1;
}
