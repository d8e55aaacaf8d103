/* Prints the unwinding information the backport's perf_jit writes for the trampoline (Python-additions/
 * Python/perf_jit_trampoline.c, build_unwind_info(): .eh_frame then .eh_frame_hdr, laid out as perf inject
 * places them after the code), for the arch it is compiled for: "<code size> <hdr size> <hex bytes>".
 * Compiled with the file itself included and linked statically with unresolved symbols allowed: the function
 * calls nothing of the interpreter. */
#include "Python/perf_jit_trampoline.c"
#include <stdio.h>

extern char _Py_trampoline_func_start[], _Py_trampoline_func_end[];

int
main(void)
{
    static uint8_t buf[1024];
    size_t hdr = 0;
    uint32_t size = (uint32_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    size_t n = build_unwind_info(buf, size, &hdr);
    printf("%u %zu ", size, hdr);
    for (size_t i = 0; i < n; i++) {
        printf("%02x", buf[i]);
    }
    printf("\n");
    return 0;
}
