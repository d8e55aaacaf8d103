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
 */
    .text
    .p2align 4
    .globl  _Py_trampoline_func_start
_Py_trampoline_func_start:
#if defined(__x86_64__)
#if defined(__CET__) && (__CET__ & 1)
    endbr64
#endif
    push    %rbp
    mov     %rsp, %rbp
    call    *%rcx
    pop     %rbp
    ret
#elif defined(__aarch64__) && defined(__AARCH64EL__) && !defined(__ILP32__)
    stp     x29, x30, [sp, #-16]!
    mov     x29, sp
    blr     x3
    ldp     x29, x30, [sp], #16
    ret
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
