/*
 * "perf_jit" backend of the perf profiler trampoline (backport of CPython
 * 3.13's Python/perf_jit_trampoline.c).
 *
 * Instead of /tmp/perf-PID.map it writes /tmp/jit-PID.dump in the jitdump
 * format of the Linux perf tools
 * (tools/perf/Documentation/jitdump-specification.txt):
 *
 *   file header
 *   for each trampoline:
 *       JIT_CODE_UNWINDING_INFO  .eh_frame (CIE + one FDE) + .eh_frame_hdr
 *                                describing the trampoline's instructions
 *       JIT_CODE_LOAD            address, size, "py::<qualname>:<filename>",
 *                                copy of the machine code
 *   JIT_CODE_CLOSE when the backend is shut down
 *
 * Timestamps are CLOCK_MONOTONIC nanoseconds (the header flag
 * JITDUMP_FLAGS_ARCH_TIMESTAMP is clear), matching `perf record -k 1`.
 * The dump file is also mapped once with PROT_READ|PROT_EXEC: that MMAP event
 * in perf.data is how `perf inject --jit` finds the dump.  `perf inject`
 * turns every JIT_CODE_LOAD into a small ELF file whose .eh_frame lets perf
 * unwind through the trampoline with --call-graph dwarf, so no frame
 * pointers are needed.
 *
 * Every record is written with a single write(2) as soon as it is created,
 * so a process that ends with os._exit() (a forked child, typically) still
 * leaves a complete dump.  After fork() the child starts its own dump.  The
 * dump lives as long as the interpreter: switching to the perf map backend
 * and back pauses it instead of starting it again.
 *
 * Shared by the 3.9 and 3.11 backports.
 */

#include "Python.h"
#include "pycore_initconfig.h"        // _PyStatus_OK()
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <elf.h>                      // EM_X86_64, EM_AARCH64
#include <fcntl.h>                    // open()
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>                 // mmap()
#include <sys/stat.h>                 // fstat()
#include <sys/syscall.h>              // SYS_gettid
#include <time.h>                     // clock_gettime()
#include <unistd.h>                   // write(), getpid()

#if defined(__x86_64__)
#  define JIT_ELF_MACH EM_X86_64
#elif defined(__aarch64__) && defined(__AARCH64EL__) && !defined(__ILP32__)
#  define JIT_ELF_MACH EM_AARCH64
#elif defined(__riscv) && __riscv_xlen == 64
#  define JIT_ELF_MACH EM_RISCV
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__) \
      && defined(_CALL_ELF) && _CALL_ELF == 2
#  define JIT_ELF_MACH EM_PPC64
#else
#  error "perf_jit: unsupported architecture"
#endif

/* Bytes reserved after every trampoline: perf inject maps the unwinding
   data right after the code, so neighbouring trampolines must not overlap
   it. */
#define PERF_JIT_CODE_PADDING 0x100

#define JITDUMP_MAGIC 0x4A695444      // "JiTD"
#define JITDUMP_VERSION 1

enum {
    JIT_CODE_LOAD = 0,
    JIT_CODE_MOVE = 1,
    JIT_CODE_DEBUG_INFO = 2,
    JIT_CODE_CLOSE = 3,
    JIT_CODE_UNWINDING_INFO = 4,
};

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t total_size;
    uint32_t elf_mach;
    uint32_t pad1;
    uint32_t pid;
    uint64_t timestamp;
    uint64_t flags;
} jitdump_header;

typedef struct {
    uint32_t id;
    uint32_t total_size;
    uint64_t timestamp;
} jitdump_record;

typedef struct {
    jitdump_record p;
    uint32_t pid;
    uint32_t tid;
    uint64_t vma;
    uint64_t code_addr;
    uint64_t code_size;
    uint64_t code_index;
    // followed by: char name[] (NUL terminated), code bytes
} jitdump_code_load;

typedef struct {
    jitdump_record p;
    uint64_t unwinding_size;      // .eh_frame + .eh_frame_hdr
    uint64_t eh_frame_hdr_size;
    uint64_t mapped_size;
    // followed by: .eh_frame, .eh_frame_hdr, padding to 8
} jitdump_unwinding_info;

static struct {
    int fd;
    void *marker;                 // PROT_READ|PROT_EXEC mapping of the file
    size_t marker_size;
    uint64_t code_index;
    pid_t owner_pid;              // process that created the dump
    PyThread_type_lock lock;
    int stopped;                  // a write failed: the dump takes no more
    dev_t dev;                    // the dump's file, to tell it from another
    ino_t ino;                    // file given its descriptor's number later
} jit_state = {.fd = -1};

static uint64_t
monotonic_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
write_all(int fd, const void *buf, size_t size)
{
    const char *p = buf;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

/* ---- DWARF call frame information for the trampoline --------------------
 *
 * The instructions of Python/asm_trampoline.S, and what they do to the
 * canonical frame address (CFA = value of the stack pointer before the call
 * that entered the trampoline):
 *
 * x86-64                           CFA        saved
 *   [endbr64]            (CET)     rsp+8      ra at CFA-8
 *   push %rbp            1 byte    rsp+16     rbp at CFA-16
 *   mov  %rsp,%rbp       3 bytes   rbp+16
 *   call *%rcx           2 bytes   rbp+16
 *   pop  %rbp            1 byte    rsp+8      rbp restored
 *   ret
 *
 * aarch64 (4-byte instructions)
 *   [paciasp]   (pac-ret, A key)   sp+0       x30 signed (RA_SIGN_STATE 1)
 *   [bti c]     (BTI without PAC)  sp+0
 *   stp x29,x30,[sp,#-16]!         sp+16      x29 at CFA-16, x30 at CFA-8
 *   mov x29,sp                     x29+16
 *   blr x3                         x29+16
 *   ldp x29,x30,[sp],#16           sp+0       x29, x30 restored
 *   [autiasp]   (pac-ret, A key)   sp+0       x30 authenticated (state 0)
 *   ret                            (return address in x30)
 *
 * (-mbranch-protection: the same conditions as in Python/asm_trampoline.S.
 * DW_CFA_AARCH64_negate_ra_state toggles RA_SIGN_STATE, which tells the
 * unwinder to strip the pointer authentication code from the return
 * address it finds for the frame, as GCC's own CFI of such a function does.)
 */

enum {
    DW_CFA_nop = 0x00,
    DW_CFA_restore_extended = 0x06,
    DW_CFA_def_cfa = 0x0c,
    DW_CFA_def_cfa_register = 0x0d,
    DW_CFA_def_cfa_offset = 0x0e,
    DW_CFA_offset_extended_sf = 0x11,
    DW_CFA_advance_loc = 0x40,
    DW_CFA_offset = 0x80,
    DW_CFA_restore = 0xc0,
};

enum {
    DW_EH_PE_udata4 = 0x03,
    DW_EH_PE_sdata4 = 0x0b,
    DW_EH_PE_pcrel = 0x10,
    DW_EH_PE_datarel = 0x30,
};

#if defined(__x86_64__)
#  define CFI_CODE_ALIGN 1
#  define CFI_DATA_ALIGN (-8)
#  define CFI_REG_SP 7
#  define CFI_REG_FP 6          // rbp
#  define CFI_REG_RA 16         // return address column
#  if defined(__CET__) && (__CET__ & 1)
#    define CFI_PROLOGUE_SKIP 4 // endbr64
#  else
#    define CFI_PROLOGUE_SKIP 0
#  endif
#elif defined(__aarch64__)
#  define CFI_CODE_ALIGN 4
#  define CFI_DATA_ALIGN (-8)
#  define CFI_REG_SP 31
#  define CFI_REG_FP 29         // x29
#  define CFI_REG_RA 30         // x30 (link register)
#elif defined(__riscv)
#  define CFI_CODE_ALIGN 1      // as GCC's: 2-byte instructions exist
#  define CFI_DATA_ALIGN (-8)
#  define CFI_REG_SP 2          // x2
#  define CFI_REG_FP 8          // x8 (s0)
#  define CFI_REG_RA 1          // x1 (ra)
#else
#  define CFI_CODE_ALIGN 4
#  define CFI_DATA_ALIGN (-8)
#  define CFI_REG_SP 1          // r1
#  define CFI_REG_RA 65         // LR
#endif

typedef struct {
    uint8_t *p;
} cfi_buf;

static void put_u8(cfi_buf *b, uint8_t v) { *b->p++ = v; }
static void put_u32(cfi_buf *b, uint32_t v) { memcpy(b->p, &v, 4); b->p += 4; }
static void put_i32(cfi_buf *b, int32_t v) { memcpy(b->p, &v, 4); b->p += 4; }

static void
put_uleb(cfi_buf *b, uint32_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        put_u8(b, v ? (byte | 0x80) : byte);
    } while (v);
}

static void
put_sleb(cfi_buf *b, int32_t v)
{
    for (;;) {
        uint8_t byte = v & 0x7f;
        v >>= 7;   // arithmetic shift
        if ((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40))) {
            put_u8(b, byte);
            return;
        }
        put_u8(b, byte | 0x80);
    }
}

static void
pad_nops(cfi_buf *b, uint8_t *start)
{
    while ((b->p - start) % 8) {
        put_u8(b, DW_CFA_nop);
    }
}

/* Write .eh_frame (one CIE, one FDE) followed by .eh_frame_hdr into out, as
   perf inject lays them out in the ELF it generates: .text at some 8-aligned
   address T (code_size bytes), .eh_frame at T + round_up(code_size, 8),
   .eh_frame_hdr right after .eh_frame.  Returns the total size and stores
   the size of .eh_frame_hdr in *hdr_size. */
static size_t
build_unwind_info(uint8_t *out, uint32_t code_size, size_t *hdr_size)
{
    cfi_buf b = {out};
    const int64_t text_to_eh_frame = ((int64_t)code_size + 7) & ~(int64_t)7;

    /* CIE */
    uint8_t *cie = b.p;
    put_u32(&b, 0);                          // length, patched below
    put_u32(&b, 0);                          // CIE id
    put_u8(&b, 1);                           // version
    put_u8(&b, 'z'); put_u8(&b, 'R'); put_u8(&b, 0);
    put_uleb(&b, CFI_CODE_ALIGN);
    put_sleb(&b, CFI_DATA_ALIGN);
    put_uleb(&b, CFI_REG_RA);
    put_uleb(&b, 1);                         // augmentation data length
    put_u8(&b, DW_EH_PE_pcrel | DW_EH_PE_sdata4);  // FDE pointer encoding
    /* state at the first instruction: just called */
#if defined(__x86_64__)
    put_u8(&b, DW_CFA_def_cfa); put_uleb(&b, CFI_REG_SP); put_uleb(&b, 8);
    put_u8(&b, DW_CFA_offset | CFI_REG_RA); put_uleb(&b, 1);   // CFA-8
#else
    put_u8(&b, DW_CFA_def_cfa); put_uleb(&b, CFI_REG_SP); put_uleb(&b, 0);
    // the return address is still in its register (x30, ra, LR)
#endif
    pad_nops(&b, cie);
    uint32_t cie_len = (uint32_t)(b.p - cie - 4);
    memcpy(cie, &cie_len, 4);
    size_t cie_size = (size_t)(b.p - cie);

    /* FDE */
    uint8_t *fde = b.p;
    put_u32(&b, 0);                          // length, patched below
    put_u32(&b, (uint32_t)(b.p - cie));      // CIE pointer (backwards)
    // pc_begin, pc-relative: .text start - address of this field
    put_i32(&b, (int32_t)(-(text_to_eh_frame + (int64_t)(b.p - out))));
    put_u32(&b, code_size);                  // pc_range
    put_uleb(&b, 0);                         // augmentation data length
#if defined(__x86_64__)
    put_u8(&b, DW_CFA_advance_loc | (CFI_PROLOGUE_SKIP + 1));  // push %rbp
    put_u8(&b, DW_CFA_def_cfa_offset); put_uleb(&b, 16);
    put_u8(&b, DW_CFA_offset | CFI_REG_FP); put_uleb(&b, 2);   // CFA-16
    put_u8(&b, DW_CFA_advance_loc | 3);      // mov %rsp,%rbp
    put_u8(&b, DW_CFA_def_cfa_register); put_uleb(&b, CFI_REG_FP);
    put_u8(&b, DW_CFA_advance_loc | 3);      // call *%rcx; pop %rbp
    put_u8(&b, DW_CFA_def_cfa); put_uleb(&b, CFI_REG_SP); put_uleb(&b, 8);
    put_u8(&b, DW_CFA_restore | CFI_REG_FP);
#elif defined(__riscv)
    /* addi sp,-16; sd ra; sd s0; addi s0,sp,16; jalr a3; ld ra; ld s0;
       addi sp,16; ret: 4 bytes each (.option norvc), code alignment 1 */
    put_u8(&b, DW_CFA_advance_loc | 4);      // addi sp, sp, -16
    put_u8(&b, DW_CFA_def_cfa_offset); put_uleb(&b, 16);
    put_u8(&b, DW_CFA_advance_loc | 8);      // sd ra, 8(sp); sd s0, 0(sp)
    put_u8(&b, DW_CFA_offset | CFI_REG_RA); put_uleb(&b, 1);   // CFA-8
    put_u8(&b, DW_CFA_offset | CFI_REG_FP); put_uleb(&b, 2);   // CFA-16
    put_u8(&b, DW_CFA_advance_loc | 4);      // addi s0, sp, 16
    put_u8(&b, DW_CFA_def_cfa); put_uleb(&b, CFI_REG_FP); put_uleb(&b, 0);
    put_u8(&b, DW_CFA_advance_loc | 8);      // jalr a3; ld ra, 8(sp)
    put_u8(&b, DW_CFA_restore | CFI_REG_RA);
    put_u8(&b, DW_CFA_advance_loc | 4);      // ld s0, 0(sp)
    put_u8(&b, DW_CFA_def_cfa); put_uleb(&b, CFI_REG_SP); put_uleb(&b, 16);
    put_u8(&b, DW_CFA_restore | CFI_REG_FP);
    put_u8(&b, DW_CFA_advance_loc | 4);      // addi sp, sp, 16
    put_u8(&b, DW_CFA_def_cfa_offset); put_uleb(&b, 0);
#elif defined(__powerpc64__)
    /* mflr r0; std r0,16(r1); stdu r1,-32(r1); std r2,24(r1); mr r12,r6;
       mtctr r12; bctrl; ld r2,24(r1); addi r1,r1,32; ld r0,16(r1);
       mtlr r0; blr.  LR is saved above the CFA (CFA+16, the caller's LR
       save doubleword): a negative factored offset, as GCC writes it. */
    put_u8(&b, DW_CFA_advance_loc | 2);      // mflr r0; std r0, 16(r1)
    put_u8(&b, DW_CFA_offset_extended_sf); put_uleb(&b, CFI_REG_RA);
    put_sleb(&b, -2);                        // CFA+16
    put_u8(&b, DW_CFA_advance_loc | 1);      // stdu r1, -32(r1)
    put_u8(&b, DW_CFA_def_cfa_offset); put_uleb(&b, 32);
    put_u8(&b, DW_CFA_advance_loc | 6);      // std r2 ... addi r1, r1, 32
    put_u8(&b, DW_CFA_def_cfa_offset); put_uleb(&b, 0);
    put_u8(&b, DW_CFA_advance_loc | 2);      // ld r0, 16(r1); mtlr r0
    put_u8(&b, DW_CFA_restore_extended); put_uleb(&b, CFI_REG_RA);
#else
#  define DW_CFA_AARCH64_negate_ra_state 0x2d
#  if defined(__ARM_FEATURE_PAC_DEFAULT) && (__ARM_FEATURE_PAC_DEFAULT & 1)
#    define CFI_AARCH64_PAC 1
    put_u8(&b, DW_CFA_advance_loc | 1);      // paciasp
    put_u8(&b, DW_CFA_AARCH64_negate_ra_state);   // x30 is signed
    put_u8(&b, DW_CFA_advance_loc | 1);      // stp x29, x30, [sp, #-16]!
#  elif defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT == 1
#    define CFI_AARCH64_PAC 0
    put_u8(&b, DW_CFA_advance_loc | 2);      // bti c; stp x29, x30, [sp, #-16]!
#  else
#    define CFI_AARCH64_PAC 0
    put_u8(&b, DW_CFA_advance_loc | 1);      // stp x29, x30, [sp, #-16]!
#  endif
    put_u8(&b, DW_CFA_def_cfa_offset); put_uleb(&b, 16);
    put_u8(&b, DW_CFA_offset | CFI_REG_FP); put_uleb(&b, 2);   // CFA-16
    put_u8(&b, DW_CFA_offset | CFI_REG_RA); put_uleb(&b, 1);   // CFA-8
    put_u8(&b, DW_CFA_advance_loc | 1);      // mov x29, sp
    put_u8(&b, DW_CFA_def_cfa_register); put_uleb(&b, CFI_REG_FP);
    put_u8(&b, DW_CFA_advance_loc | 2);      // blr x3; ldp x29, x30, [sp], #16
    put_u8(&b, DW_CFA_def_cfa); put_uleb(&b, CFI_REG_SP); put_uleb(&b, 0);
    put_u8(&b, DW_CFA_restore | CFI_REG_FP);
    put_u8(&b, DW_CFA_restore | CFI_REG_RA);
#  if CFI_AARCH64_PAC
    put_u8(&b, DW_CFA_advance_loc | 1);      // autiasp
    put_u8(&b, DW_CFA_AARCH64_negate_ra_state);   // x30 is plain again
#  endif
#endif
    pad_nops(&b, fde);
    uint32_t fde_len = (uint32_t)(b.p - fde - 4);
    memcpy(fde, &fde_len, 4);
    size_t eh_frame_size = (size_t)(b.p - out);

    /* .eh_frame_hdr (its datarel base is its own start) */
    uint8_t *hdr = b.p;
    put_u8(&b, 1);                                      // version
    put_u8(&b, DW_EH_PE_pcrel | DW_EH_PE_sdata4);       // eh_frame_ptr enc
    put_u8(&b, DW_EH_PE_udata4);                        // fde_count enc
    put_u8(&b, DW_EH_PE_datarel | DW_EH_PE_sdata4);     // table enc
    put_i32(&b, (int32_t)(-(int64_t)(eh_frame_size + 4)));  // -> .eh_frame
    put_u32(&b, 1);                                     // fde_count
    // table: (initial location, FDE address), relative to hdr start
    put_i32(&b, (int32_t)(-(text_to_eh_frame + (int64_t)eh_frame_size)));
    put_i32(&b, (int32_t)(-(int64_t)(eh_frame_size - cie_size)));
    *hdr_size = (size_t)(b.p - hdr);
    return (size_t)(b.p - out);
}

/* ---- backend callbacks ---- */

/* Whether jit_state.fd still refers to the dump (its stat in *st).  A
   process may close descriptors it did not open (a forked child before
   exec() with os.closerange() or close_fds, a daemon detaching), and the
   number may then be given to another file, which must never receive a
   record, nor be closed by us. */
static int
fd_is_dump(struct stat *st)
{
    return fstat(jit_state.fd, st) == 0
           && st->st_dev == jit_state.dev && st->st_ino == jit_state.ino;
}

/* The dump's descriptor was closed, or its number now names another file:
   open the dump again by its name, to go on at its end (perf inject found it
   by its mapping, which a close leaves in place).  The old number is left
   alone: it may be another file's now.  Nothing is created: a dump that was
   removed or replaced meanwhile takes no more.  Returns 0 with the dump's
   stat in *st, or -1.  Called with the lock held. */
static int
reopen_dump(struct stat *st)
{
    char filename[100];
    snprintf(filename, sizeof(filename), "/tmp/jit-%ld.dump",
             (long)jit_state.owner_pid);
    int fd = _PyPerf_ReopenOwnFile(filename, O_RDWR);
    if (fd < 0) {
        return -1;
    }
    if (fstat(fd, st) != 0 || st->st_dev != jit_state.dev
        || st->st_ino != jit_state.ino
        || lseek(fd, st->st_size, SEEK_SET) < 0)
    {
        close(fd);
        return -1;
    }
    jit_state.fd = fd;
    return 0;
}

/* A forked child's copy of its parent's dump: dropped without a
   JIT_CODE_CLOSE record (the dump is the parent's) and without touching the
   lock, which a parent thread may have held at fork() time (it is leaked on
   purpose; the child's own dump gets a new one).  A descriptor that no
   longer refers to the dump (its number went to another file) is left
   alone. */
static void
drop_inherited_dump(void)
{
    struct stat st;
    if (fd_is_dump(&st)) {
        close(jit_state.fd);
    }
    jit_state.fd = -1;
    jit_state.lock = NULL;
    if (jit_state.marker != NULL) {
        munmap(jit_state.marker, jit_state.marker_size);
        jit_state.marker = NULL;
    }
}

static void *
perf_map_jit_init(void)
{
    _PyPerfTrampoline_SetCodePadding(PERF_JIT_CODE_PADDING);
    pid_t pid = getpid();
    if (jit_state.fd >= 0) {
        if (jit_state.owner_pid == pid) {
            /* Paused by a switch to another backend: carry on writing the
               same dump, so that it keeps the records of every perf_jit
               period of the process. */
            return &jit_state;
        }
        drop_inherited_dump();
    }
    char filename[100];
    snprintf(filename, sizeof(filename), "/tmp/jit-%jd.dump", (intmax_t)pid);
    int fd = _PyPerf_OpenOwnFile(filename, O_RDWR);
    struct stat st;
    if (fd < 0 || ftruncate(fd, 0) != 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
        }
        _PyPerf_SetOSError(err, err == EPERM
            ? "can't use /tmp/jit-PID.dump: it must be a regular file of "
              "this user with no other name (made by someone else?)"
            : "can't create /tmp/jit-PID.dump");
        return NULL;
    }
    long page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0) {
        page_size = 4096;
    }
    /* The marker perf inject --jit looks for (an executable mapping of a
       file named jit-PID.dump); nothing is ever read through it.  A /tmp
       mounted noexec, or a policy denying executable mappings, refuses it. */
    void *marker = mmap(NULL, (size_t)page_size, PROT_READ | PROT_EXEC,
                        MAP_PRIVATE, fd, 0);
    if (marker == MAP_FAILED) {
        int err = errno;
        close(fd);
        unlink(filename);
        _PyPerf_SetOSError(err, "can't map /tmp/jit-PID.dump executable "
                                "(perf inject --jit finds the dump by that "
                                "mapping)");
        return NULL;
    }
    jitdump_header header;
    memset(&header, 0, sizeof(header));
    header.magic = JITDUMP_MAGIC;
    header.version = JITDUMP_VERSION;
    header.total_size = sizeof(header);
    header.elf_mach = JIT_ELF_MACH;
    header.pid = (uint32_t)pid;
    header.timestamp = monotonic_ns();
    header.flags = 0;   // no JITDUMP_FLAGS_ARCH_TIMESTAMP: CLOCK_MONOTONIC
    PyThread_type_lock lock = jit_state.lock;
    if (lock == NULL) {
        lock = PyThread_allocate_lock();
    }
    if (lock == NULL || write_all(fd, &header, sizeof(header)) < 0) {
        int err = errno;
        munmap(marker, (size_t)page_size);
        close(fd);
        unlink(filename);
        if (lock == NULL) {
            PyErr_NoMemory();
        }
        else {
            jit_state.lock = lock;
            _PyPerf_SetOSError(err, "can't write /tmp/jit-PID.dump");
        }
        return NULL;
    }
    jit_state.lock = lock;
    jit_state.fd = fd;
    jit_state.marker = marker;
    jit_state.marker_size = (size_t)page_size;
    jit_state.code_index = 0;
    jit_state.stopped = 0;
    jit_state.owner_pid = pid;
    jit_state.dev = st.st_dev;
    jit_state.ino = st.st_ino;
    return &jit_state;
}

/* A record could not be written whole (a full disk, a file size limit):
   cut the dump back to its last complete record, where perf inject stops
   reading, and write nothing more to it (a record after a partial one
   would be read from the wrong offset).  Said once, on stderr.  Called
   with the lock held. */
static void
stop_dump(off_t complete_size, int err)
{
    jit_state.stopped = 1;
    if (complete_size >= 0 && ftruncate(jit_state.fd, complete_size) == 0) {
        (void)lseek(jit_state.fd, complete_size, SEEK_SET);
    }
    // else the partial record stays: perf inject stops reading there, and
    // nothing is written after it
    fprintf(stderr, "Python: warning: perf trampoline: writing "
            "/tmp/jit-%ld.dump failed (%s); it ends with the last complete "
            "record and takes no more\n", (long)jit_state.owner_pid,
            strerror(err));
    fflush(stderr);
}

static void
perf_map_jit_write_entry(void *state, const void *code_addr,
                         unsigned int code_size, PyCodeObject *co)
{
    if (jit_state.fd < 0 || jit_state.stopped) {
        // Counted as written: the code object takes the fast path from
        // now on, as it would have.
        return;
    }
    PyObject *tofree1, *tofree2;
    const char *name = _PyPerf_CodeStringUTF8(_PyPerf_CODE_NAME(co), &tofree1);
    const char *filename = _PyPerf_CodeStringUTF8(co->co_filename, &tofree2);
    size_t name_size = strlen(name) + strlen(filename) + sizeof("py:::");

    uint8_t unwind[256];
    size_t hdr_size;
    size_t unwind_size = build_unwind_info(unwind, code_size, &hdr_size);
    size_t unwind_rec_size = (sizeof(jitdump_unwinding_info) + unwind_size
                              + 7) & ~(size_t)7;
    size_t load_rec_size = sizeof(jitdump_code_load) + name_size + code_size;
    uint8_t *buf = PyMem_RawCalloc(1, unwind_rec_size + load_rec_size);
    if (buf == NULL) {
        _PyPerf_EntryNotWritten();
        goto done;
    }

    jitdump_unwinding_info *ui = (jitdump_unwinding_info *)buf;
    ui->p.id = JIT_CODE_UNWINDING_INFO;
    ui->p.total_size = (uint32_t)unwind_rec_size;
    ui->unwinding_size = unwind_size;
    ui->eh_frame_hdr_size = hdr_size;
    ui->mapped_size = (unwind_size + 15) & ~(size_t)15;
    assert(ui->mapped_size <= PERF_JIT_CODE_PADDING);
    memcpy(buf + sizeof(*ui), unwind, unwind_size);

    jitdump_code_load *cl = (jitdump_code_load *)(buf + unwind_rec_size);
    cl->p.id = JIT_CODE_LOAD;
    cl->p.total_size = (uint32_t)load_rec_size;
    cl->pid = (uint32_t)getpid();
    cl->tid = (uint32_t)syscall(SYS_gettid);
    cl->vma = (uint64_t)(uintptr_t)code_addr;
    cl->code_addr = (uint64_t)(uintptr_t)code_addr;
    cl->code_size = code_size;
    char *name_out = (char *)(cl + 1);
    snprintf(name_out, name_size, "py::%s:%s", name, filename);
    memcpy(name_out + name_size, code_addr, code_size);

    PyThread_acquire_lock(jit_state.lock, WAIT_LOCK);
    cl->code_index = ++jit_state.code_index;
    ui->p.timestamp = monotonic_ns();
    cl->p.timestamp = monotonic_ns();
    struct stat st;
    if (!jit_state.stopped && !fd_is_dump(&st) && reopen_dump(&st) < 0) {
        jit_state.stopped = 1;     // silently: the program closed it
    }
    if (!jit_state.stopped) {
        // Records are only ever appended: the dump's end is the end of its
        // last complete record.
        if (write_all(jit_state.fd, buf, unwind_rec_size + load_rec_size) < 0) {
            stop_dump((off_t)st.st_size, errno);
        }
    }
    // A dump that takes no more counts the entry as written all the same.
    PyThread_release_lock(jit_state.lock);
    PyMem_RawFree(buf);
done:
    Py_XDECREF(tofree1);
    Py_XDECREF(tofree2);
}

/* Stopping the backend (a switch to another one) only pauses the dump: it
   stays open and mapped, and perf_map_jit_init() carries on with it.  A
   forked child drops the copy it inherited. */
static int
perf_map_jit_fini(void *state)
{
    if (jit_state.fd >= 0 && jit_state.owner_pid != getpid()) {
        drop_inherited_dump();
    }
    return 0;
}

void
_PyPerfJit_CloseDump(void)
{
    if (jit_state.fd < 0) {
        return;
    }
    if (jit_state.owner_pid != getpid()) {
        drop_inherited_dump();
        return;
    }
    PyThread_acquire_lock(jit_state.lock, WAIT_LOCK);
    jitdump_record rec = {JIT_CODE_CLOSE, sizeof(jitdump_record),
                          monotonic_ns()};
    struct stat st;
    if (fd_is_dump(&st) || reopen_dump(&st) == 0) {
        if (!jit_state.stopped) {
            (void)write_all(jit_state.fd, &rec, sizeof(rec));
        }
        close(jit_state.fd);
    }
    jit_state.fd = -1;
    PyThread_release_lock(jit_state.lock);
    if (jit_state.marker != NULL) {
        munmap(jit_state.marker, jit_state.marker_size);
        jit_state.marker = NULL;
    }
}

_PyPerf_Callbacks _Py_perfmap_jit_callbacks = {
    &perf_map_jit_init,
    &perf_map_jit_write_entry,
    &perf_map_jit_fini,
};

#endif  /* PY_HAVE_PERF_TRAMPOLINE */
