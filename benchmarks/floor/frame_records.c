/* Does perf's frame-pointer walk (the kernel's user callchain) follow frame records that no call made?
 *
 *   cc -O2 -fno-omit-frame-pointer -o frame_records benchmarks/floor/frame_records.c   (x86-64 or aarch64)
 *   perf record -F 999 -g -- ./frame_records heap|stack|down 1.0 && perf script -F comm,ip,sym
 *
 * spin() is called with the frame-pointer register (rbp, x29) pointing at a chain of six hand-written records {next, return address}, the
 * last of which links to main's own frame; the return addresses lie in an executable page nothing is ever
 * written to, which /tmp/perf-PID.map names fake_0 .. fake_5 (as a perf map would name one slot per code
 * object).  Where the records are -- PLACE:
 *   heap   malloc'd memory, outer records at higher addresses (below the stack: the walk goes up into it)
 *   stack  main's frame, outer records at higher addresses, as real frames are
 *   down   malloc'd memory, outer records at LOWER addresses (not in the order frames have on a stack)
 * A sample in spin() whose chain reads spin, call_with_chain, fake_0 .. fake_5, __libc_start_call_main is a
 * chain the unwinder followed through every record.  docs/trampoline-floor.md has what it gave. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define N 6
struct rec { struct rec *next; uintptr_t ret; };

__attribute__((noinline, used)) long spin(double seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long n = 0;
    do { for (int i = 0; i < 100000; i++) n += i; clock_gettime(CLOCK_MONOTONIC, &t); }
    while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    return n;
}

/* call spin with the frame-pointer register = top: spin's own prologue then saves it, so spin's record's
 * next is our chain; after the call it is restored */
__attribute__((noinline)) static long call_with_chain(struct rec *top, double seconds) {
#if defined(__x86_64__)
    long r;
    __asm__ volatile(
        "push %%rbp\n\t"
        "sub $8, %%rsp\n\t"
        "mov %1, %%rbp\n\t"
        "call spin\n\t"
        "add $8, %%rsp\n\t"
        "pop %%rbp\n\t"
        : "=a"(r) : "r"(top), "Yz"(seconds) : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
          "xmm1", "memory");
    return r;
#elif defined(__aarch64__)
    register long x0 __asm__("x0");
    register double d0 __asm__("d0") = seconds;
    __asm__ volatile(
        "stp x29, x30, [sp, #-16]!\n\t"
        "mov x29, %1\n\t"
        "bl spin\n\t"
        "ldp x29, x30, [sp], #16\n\t"
        : "=r"(x0) : "r"(top), "w"(d0) : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
          "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x30", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
          "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29",
          "v30", "v31", "memory");
    return x0;
#else
#error "x86-64 or aarch64"
#endif
}

int main(int argc, char **argv) {
    const char *place = argc > 1 ? argv[1] : "heap";
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *names = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *map = fopen(path, "w");
    for (int i = 0; i < N; i++)
        fprintf(map, "%lx 10 fake_%d\n", (unsigned long)(names + 16 * i), i);
    fclose(map);
    struct rec onstack[N + 1];
    struct rec *heap = malloc(sizeof(struct rec) * (N + 1));
    struct rec *r = strcmp(place, "stack") == 0 ? onstack : heap;
    /* r[0] is the innermost record; r[N-1] the outermost, whose next is main's own frame */
    struct rec *order[N];
    for (int i = 0; i < N; i++)
        order[i] = strcmp(place, "down") == 0 ? &r[N - 1 - i] : &r[i];
    for (int i = 0; i < N; i++) {
        order[i]->ret = (uintptr_t)(names + 16 * i + 4);
        order[i]->next = i + 1 < N ? order[i + 1] : (struct rec *)__builtin_frame_address(0);
    }
    printf("%s: records at %p..%p, main's frame %p\n", place, (void *)order[0], (void *)order[N - 1],
           __builtin_frame_address(0));
    fflush(stdout);
    return call_with_chain(order[0], argc > 2 ? atof(argv[2]) : 1.0) == 42;
}
