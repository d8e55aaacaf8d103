/* Template of the perf profiler trampoline (backport for CPython < 3.12).
 *
 * Python/perf_trampoline.c copies the bytes between _Py_trampoline_func_start
 * and _Py_trampoline_func_end once per code object into executable memory.
 * Each copy is called as
 *
 *     PyObject *trampoline(PyThreadState *tstate, <frame> *frame,
 *                          int throwflag, evaluator_t evaluator);
 *
 * and behaves as "return evaluator(tstate, frame, throwflag);" while keeping
 * a normal frame record, so that frame-pointer unwinders (perf record -g) see
 * one distinct return address per Python code object.  The first three
 * arguments are passed through untouched in their registers, which is why the
 * evaluator comes last; the frame type does not matter here, so the same
 * template serves 3.9 (PyFrameObject *) and 3.11 (_PyInterpreterFrame *).
 *
 * Python/perf_jit_trampoline.c describes these exact instructions in the
 * unwinding information of the jitdump; keep both in sync.
 *
 * Branch protection.  Where the compiler protects indirect branch targets or
 * return addresses by default, so does this file, and its GNU property note
 * says so: the linker ANDs the notes of all objects, so one object without a
 * note silently turns the feature off for the whole interpreter (or
 * libpython).  x86-64, -fcf-protection (__CET__): endbr64 (IBT) and a plain
 * call/ret pair (SHSTK).  aarch64, -mbranch-protection (Ubuntu's and Fedora's
 * default is "standard" = bti + pac-ret): every copy is entered by an
 * indirect call (blr), so it starts with a landing pad; with pac-ret (A key)
 * that is paciasp, which signs the return address in x30 before it is saved
 * in the frame record and is itself a BTI landing pad for blr, and autiasp
 * authenticates it again before ret (as GCC does for a non-leaf function);
 * with BTI alone it is bti c.  The B key (pac-ret+b-key) is not used here:
 * then the return address is not signed and the note does not claim PAC.
 */
#if defined(__aarch64__) && defined(__AARCH64EL__) && !defined(__ILP32__)
#  if defined(__ARM_FEATURE_PAC_DEFAULT) && (__ARM_FEATURE_PAC_DEFAULT & 1)
#    define PY_TRAMPOLINE_PAC 1     /* pac-ret with the A key */
#  else
#    define PY_TRAMPOLINE_PAC 0
#  endif
#  if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT == 1
#    define PY_TRAMPOLINE_BTI 1
#  else
#    define PY_TRAMPOLINE_BTI 0
#  endif
#endif
    .text
    .p2align 4
    .globl  _Py_trampoline_func_start
    /* Where the call returns: the return address the eval loop's frame
       records name a frame by (pycore_perf_trampoline.h). */
    .globl  _Py_trampoline_func_return
_Py_trampoline_func_start:
#if defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
    endbr64
#endif
    push    %rbp
    mov     %rsp, %rbp
    call    *%rcx
_Py_trampoline_func_return:
    pop     %rbp
    ret
#elif defined(__aarch64__) && defined(__AARCH64EL__) && !defined(__ILP32__)
/* HINT-space encodings: they assemble for any -march, and are NOPs on
   processors without the feature. */
#if PY_TRAMPOLINE_PAC
    hint    #25             /* paciasp: sign x30 with SP; landing pad for blr */
#elif PY_TRAMPOLINE_BTI
    hint    #34             /* bti c: landing pad for blr */
#endif
    stp     x29, x30, [sp, #-16]!
    mov     x29, sp
    blr     x3
_Py_trampoline_func_return:
    ldp     x29, x30, [sp], #16
#if PY_TRAMPOLINE_PAC
    hint    #29             /* autiasp: authenticate x30 (SP is as at entry) */
#endif
    ret
#elif defined(__riscv) && __riscv_xlen == 64
/* RISC-V 64 (LP64): the frame record GCC builds with frame pointers, s0
   pointing at the frame's top (the CFA), the return address at s0-8 and the
   caller's s0 at s0-16, which the kernel's call chain walker follows.
   Uncompressed, so that each instruction is 4 bytes with or without the C
   extension and one unwind description fits every build. */
    .option push
    .option norvc
    addi    sp, sp, -16
    sd      ra, 8(sp)
    sd      s0, 0(sp)
    addi    s0, sp, 16
    jalr    a3
_Py_trampoline_func_return:
    ld      ra, 8(sp)
    ld      s0, 0(sp)
    addi    sp, sp, 16
    ret
    .option pop
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__) \
      && defined(_CALL_ELF) && _CALL_ELF == 2
/* 64-bit PowerPC, ELFv2 (ppc64le).  Frames are linked by the back chain (the
   doubleword at r1 is the caller's r1) and a function saves its return
   address in its caller's LR save doubleword (caller's r1 + 16): what the
   kernel's call chain walker follows, whatever the flags.  A frame of the
   ABI's minimum size (32 bytes), r2 (the TOC pointer) saved and restored
   around the call, since the template has no local entry point and an
   evaluator of another module returns with its own, and the evaluator
   called through CTR with its address in r12, as its global entry expects. */
    mflr    0
    std     0, 16(1)
    stdu    1, -32(1)
    std     2, 24(1)
    mr      12, 6
    mtctr   12
    bctrl
_Py_trampoline_func_return:
    ld      2, 24(1)
    addi    1, 1, 32
    ld      0, 16(1)
    mtlr    0
    blr
#endif
    .globl  _Py_trampoline_func_end
_Py_trampoline_func_end:

    .section .note.GNU-stack,"",@progbits

#if defined(__x86_64__) && defined(__CET__) && (__CET__ & 3)
/* GNU property note: this object supports IBT (endbr64 above) and SHSTK
   (plain call/ret pairs), so linking it in keeps the output CET-enabled. */
    .section .note.gnu.property,"a"
    .p2align 3
    .long   1f - 0f         /* name size */
    .long   4f - 1f         /* descriptor size */
    .long   5               /* NT_GNU_PROPERTY_TYPE_0 */
0:
    .string "GNU"
1:
    .p2align 3
    .long   0xc0000002      /* GNU_PROPERTY_X86_FEATURE_1_AND */
    .long   3f - 2f
2:
    .long   __CET__ & 3     /* IBT (1) | SHSTK (2) as enabled by -fcf-protection */
3:
    .p2align 3
4:
#endif

#if defined(__aarch64__) && defined(__AARCH64EL__) && !defined(__ILP32__) \
    && (PY_TRAMPOLINE_BTI || PY_TRAMPOLINE_PAC)
/* GNU property note: this object supports BTI (a landing pad above) and/or
   PAC (return address signed above), as the compiler's defaults ask, so
   linking it in keeps the output's BTI and PAC marking. */
    .section .note.gnu.property,"a"
    .p2align 3
    .long   1f - 0f         /* name size */
    .long   4f - 1f         /* descriptor size */
    .long   5               /* NT_GNU_PROPERTY_TYPE_0 */
0:
    .string "GNU"
1:
    .p2align 3
    .long   0xc0000000      /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
    .long   3f - 2f
2:
    .long   PY_TRAMPOLINE_BTI | (PY_TRAMPOLINE_PAC << 1)   /* BTI (1) | PAC (2) */
3:
    .p2align 3
4:
#endif
