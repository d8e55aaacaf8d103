/* Prints the unwinding information 3.13's perf_jit writes for the trampoline (Python/perf_jit_trampoline.c
 * with the series: elf_init_ehframe(), then the .eh_frame_hdr as perf_map_jit_write_entry() fills it), for
 * the arch it is compiled for: "<code size> <hdr size> <hex bytes>".  Compiled with the file itself included
 * and linked statically with unresolved symbols allowed: neither calls anything of the interpreter. */
#include "Python/perf_jit_trampoline.c"
#include <stdio.h>

extern char _Py_trampoline_func_start[], _Py_trampoline_func_end[];

int
main(void)
{
    static char buffer[1024];
    ELFObjectContext ctx;
    uword code_size = (uword)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    ctx.code_size = code_size;
    ctx.startp = ctx.p = (uint8_t *)buffer;
    elf_init_ehframe(&ctx);
    int eh_frame_size = ctx.p - ctx.startp;
    EhFrameHeader f;
    f.version = 1;
    f.eh_frame_ptr_enc = DwarfSData4 | DwarfPcRel;
    f.fde_count_enc = DwarfUData4;
    f.table_enc = DwarfSData4 | DwarfDataRel;
    f.eh_frame_ptr = -(eh_frame_size + 4 * sizeof(unsigned char));
    f.eh_fde_count = 1;
    f.from = -(round_up(code_size, 8) + eh_frame_size);
    f.to = -(eh_frame_size - (int)(ctx.eh_frame_p - ctx.startp));
    printf("%lu %zu ", (unsigned long)code_size, sizeof(f));
    for (int i = 0; i < eh_frame_size; i++) {
        printf("%02x", (unsigned char)buffer[i]);
    }
    for (size_t i = 0; i < sizeof(f); i++) {
        printf("%02x", ((unsigned char *)&f)[i]);
    }
    printf("\n");
    return 0;
}
