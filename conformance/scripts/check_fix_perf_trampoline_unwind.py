#!/usr/bin/env python3
# requires: perf perf_jit
# fixes: gh-136541
"""Reproducer check for gh-136541: perf trampoline frame record and unwind info.

CPython 3.13.5 has three related defects (fixed upstream in 3.13.6):

* x86_64: the trampoline is "sub $8,%rsp; call *%rcx; add $8,%rsp; ret",
  without a frame record, so frame-pointer unwinders skip its caller;
* the jitdump's FDE initial location is hardcoded (-0x30), which is only right
  for the old x86_64 trampoline size and CIE layout;
* aarch64: the CIE uses x86_64 conventions and the FDE is malformed, so perf
  cannot unwind through the trampolines with -X perf_jit.

What is checked (all on the interpreter running this script):

A. "-X perf": a child reads the bytes of a live trampoline through
   /proc/self/mem at the address listed in /tmp/perf-PID.map. The bytes are
   decoded and simulated; at the call into the evaluator, the frame-pointer
   register must point at a frame record [caller FP, return address].
B. "-X perf_jit": /tmp/jit-PID.dump is parsed. For every unwinding-info record
   the CIE/FDE are decoded strictly, the FDE must cover exactly the code of
   the following code-load record in the DSO layout that "perf inject --jit"
   synthesizes (code | .eh_frame | .eh_frame_hdr), the .eh_frame_hdr must
   point at the code and the FDE, and the CFI rows, evaluated at every
   instruction boundary and at the call site, must give the true CFA, return
   address and saved frame pointer of the simulated trampoline. The code bytes
   get the same frame-record check as in A.
C. Branch protection (aarch64, where sysconfig's CFLAGS have
   -mbranch-protection; gh-139808, patches/3.13/0007): every copy is entered
   by blr, so the first instruction must be a landing pad (bti c, or paciasp,
   which is one for blr); with pac-ret (A key) the return address must be
   signed (paciasp) before the frame record saves it and authenticated
   (autiasp) before ret.  The simulation tracks the return address's sign
   state, and in B the CFI's RA_SIGN_STATE (DW_CFA_AARCH64_negate_ra_state)
   must match it at every row: the unwinder strips the authentication code
   only where the CFI says the return address is signed.

D. riscv64 (not in 3.13.5, whose riscv trampoline saves ra but builds no
   frame record and whose perf_jit does not build there, gh-121201; the
   project's series, patches/3.13/0032): the frame record is the one GCC
   builds with frame pointers, s0 pointing at the frame's top (the CFA), the
   return address at s0-8 and the caller's s0 at s0-16; the CIE's code
   alignment is 1, as GCC's (2-byte instructions exist there).

E. ppc64le (no trampoline in 3.13.5, whose asm_trampoline.S has no powerpc
   branch; patches/3.13/0033): frames are linked by the ELFv2 back chain, so
   the "frame record" is the trampoline's own frame, whose first doubleword
   (at r1) holds the caller's r1, with the return address in the caller's
   LR save doubleword (caller's r1 + 16), which is what the kernel's call
   chain walker reads; the TOC pointer (r2) must be saved before the call
   and restored after it.

Supported architectures: x86_64, aarch64, riscv64 and ppc64le (little
endian).
Exit status: 0 = fixed, 1 = defect present (messages on stderr),
2 = cannot be checked here. Standard library only.
"""

import os
import platform
import re
import struct
import subprocess
import sys
import sysconfig

from childcheck import sleb, uleb

ARCH = platform.machine()
AARCH64 = ARCH in ("aarch64", "arm64")
PROBE = "trampoline_unwind_probe"

CHILD_PERF = f"""
import os
def {PROBE}():
    return 1
{PROBE}()
entry = None
with open(f"/tmp/perf-{{os.getpid()}}.map") as f:
    for line in f:
        addr, size, name = line.rstrip("\\n").split(" ", 2)
        if name.startswith("py::{PROBE}:"):
            entry = (int(addr, 16), int(size, 16))
if entry is None:
    raise SystemExit("no perf map entry for the probe")
with open("/proc/self/mem", "rb", buffering=0) as mem:
    mem.seek(entry[0])
    code = mem.read(entry[1])
print("CODE", os.getpid(), code.hex(), flush=True)
"""

CHILD_JIT = f"""
import os
def {PROBE}():
    return 1
{PROBE}()
print("PID", os.getpid(), flush=True)
"""

# --------------------------------------------------------------------------
# Instruction decoding and simulation of the trampoline
#
# Addresses are offsets from the stack pointer at function entry ("E").
# x86_64: [E] holds the return address, CFA = E + 8.
# aarch64: the return address is in x30, CFA = E.
# riscv64: the return address is in ra (x1), CFA = E.
# ppc64le: the return address is in LR (DWARF 65), CFA = E; the frame record
# is the back chain: {caller's r1} at r1, the RA at caller's r1 + 16.
# FP_RECORD: where the frame record [caller FP, return address] lies from the
# frame pointer (x86-64 and aarch64: at it; riscv64: 16 bytes below it).
# CODE_ALIGN: the code alignment factor a CIE of the arch has (GCC's).
# --------------------------------------------------------------------------

FP_RECORD = 0
CODE_ALIGN = 4

if ARCH == "x86_64":
    REG_SP, REG_FP, REG_RA = 7, 6, 16
    TRUE_CFA = 8
    CODE_ALIGN = 1
    INSNS = [
        (bytes.fromhex("f30f1efa"), "nop"),        # endbr64
        (bytes.fromhex("55"), "push_fp"),
        (bytes.fromhex("4889e5"), "mov_fp_sp"),
        (bytes.fromhex("4883ec08"), "sub8"),
        (bytes.fromhex("ffd1"), "call"),
        (bytes.fromhex("4883c408"), "add8"),
        (bytes.fromhex("5d"), "pop_fp"),
        (bytes.fromhex("c3"), "ret"),
    ]
elif AARCH64:
    REG_SP, REG_FP, REG_RA = 31, 29, 30
    TRUE_CFA = 0
    INSNS = [
        (struct.pack("<I", 0xD503233F), "pac"),         # paciasp (hint #25): sign x30 with SP
        (struct.pack("<I", 0xD50323BF), "aut"),         # autiasp (hint #29): authenticate x30
        (struct.pack("<I", 0xD503245F), "bti_c"),       # bti c (hint #34): landing pad for blr
        (struct.pack("<I", 0xA9BF7BFD), "stp_fp_lr"),   # stp x29, x30, [sp, -16]!
        (struct.pack("<I", 0x910003FD), "mov_fp_sp"),   # mov x29, sp
        (struct.pack("<I", 0xD63F0060), "call"),        # blr x3
        (struct.pack("<I", 0xA8C17BFD), "ldp_fp_lr"),   # ldp x29, x30, [sp], 16
        (struct.pack("<I", 0xD65F03C0), "ret"),
    ]
elif ARCH == "riscv64":
    REG_SP, REG_FP, REG_RA = 2, 8, 1
    TRUE_CFA = 0
    FP_RECORD = -16
    CODE_ALIGN = 1
    INSNS = [(struct.pack("<I", word), kind) for word, kind in [
        (0xFF010113, "sub16"),          # addi sp, sp, -16
        (0x00113423, "sd_ra_8"),        # sd ra, 8(sp)
        (0x00813023, "sd_fp_0"),        # sd s0, 0(sp)
        (0x01010413, "fp_sp16"),        # addi s0, sp, 16
        (0x000680E7, "call"),           # jalr a3
        (0x00813083, "ld_ra_8"),        # ld ra, 8(sp)
        (0x00013403, "ld_fp_0"),        # ld s0, 0(sp)
        (0x01010113, "add16"),          # addi sp, sp, 16
        (0x00008067, "ret"),            # ret (jalr zero, 0(ra))
    ]] + [(struct.pack("<H", half), kind) for half, kind in [
        # the compressed forms an assembler for rv64gc makes of 3.13.5's own trampoline
        (0x1141, "sub16"),              # c.addi16sp sp, -16
        (0xE406, "sd_ra_8"),            # c.sdsp ra, 8(sp)
        (0x9682, "call"),               # c.jalr a3
        (0x60A2, "ld_ra_8"),            # c.ldsp ra, 8(sp)
        (0x0141, "add16"),              # c.addi sp, 16
        (0x8082, "ret"),                # c.jr ra
    ]]
elif ARCH == "ppc64le":
    REG_SP, REG_FP, REG_RA = 1, 31, 65
    TRUE_CFA = 0
    INSNS = [(struct.pack("<I", word), kind) for word, kind in [
        (0x7C0802A6, "mflr_r0"),        # mflr r0
        (0xF8010010, "std_r0_16"),      # std r0, 16(r1): LR save doubleword
        (0xF821FFE1, "stdu32"),         # stdu r1, -32(r1): frame + back chain
        (0xF8410018, "std_toc"),        # std r2, 24(r1)
        (0x7CCC3378, "nop"),            # mr r12, r6
        (0x7D8903A6, "nop"),            # mtctr r12
        (0x4E800421, "call"),           # bctrl
        (0xE8410018, "ld_toc"),         # ld r2, 24(r1)
        (0x38210020, "add32"),          # addi r1, r1, 32
        (0xE8010010, "ld_r0_16"),       # ld r0, 16(r1)
        (0x7C0803A6, "mtlr_r0"),        # mtlr r0
        (0x4E800020, "ret"),            # blr
    ]]
else:
    INSNS = None


def decode(code):
    """Return a list of (offset, length, kind)."""
    out, off = [], 0
    while off < len(code):
        if AARCH64 and not any(code.startswith(p, off) for p, _k in INSNS):
            word = code[off:off + 4]
            if len(word) == 4 and (struct.unpack("<I", word)[0] & 0xFFFFF01F) == 0xD503201F:
                out.append((off, 4, "nop"))        # HINT space: bti/paciasp/...
                off += 4
                continue
        for pattern, kind in INSNS:
            if code.startswith(pattern, off):
                out.append((off, len(pattern), kind))
                off += len(pattern)
                break
        else:
            raise ValueError(f"unknown instruction at +{off}: "
                             f"{code[off:off + 4].hex()} (code {code.hex()})")
    return out


class State:
    def __init__(self):
        self.sp = 0                 # SP = E + sp
        self.fp = None              # None: caller's value; int: E + fp
        self.ra_in_reg = ARCH != "x86_64"   # aarch64: x30 holds the RA; riscv64: ra
        self.saved = {}             # reg -> address (offset from E)
        self.stale = {}             # reg -> slot that still holds its value
                                    # after it was reloaded (pop/ldp)
        self.ra_signed = False      # aarch64: the return address (in x30
                                    # or saved) carries a PAC (paciasp)
        self.r0_ra = False          # ppc64le: r0 holds the return address
        self.chain = None           # ppc64le: (slot, value) of the back chain
        self.toc_saved = False      # ppc64le: r2 stored in the frame

    def copy(self):
        s = State()
        s.sp, s.fp, s.ra_in_reg, s.saved = (self.sp, self.fp, self.ra_in_reg,
                                            dict(self.saved))
        s.stale = dict(self.stale)
        s.ra_signed = self.ra_signed
        s.r0_ra, s.chain, s.toc_saved = self.r0_ra, self.chain, self.toc_saved
        return s


def simulate(insns):
    """Return ([(offset, state before insn, kind)], call-site state)."""
    st, rows, call_state = State(), [], None
    for off, _ln, kind in insns:
        rows.append((off, st.copy(), kind))
        if kind == "push_fp":
            st.sp -= 8
            st.saved[REG_FP] = st.sp
        elif kind == "mov_fp_sp":
            st.fp = st.sp
        elif kind == "sub8":
            st.sp -= 8
        elif kind == "add8":
            st.sp += 8
        elif kind == "pop_fp":
            st.fp = None
            st.stale[REG_FP] = st.saved.pop(REG_FP, None)
            st.sp += 8
        elif kind == "stp_fp_lr":
            st.sp -= 16
            st.saved[REG_FP] = st.sp
            st.saved[REG_RA] = st.sp + 8
        elif kind == "ldp_fp_lr":
            st.fp = None
            st.ra_in_reg = True
            st.stale[REG_FP] = st.saved.pop(REG_FP, None)
            st.stale[REG_RA] = st.saved.pop(REG_RA, None)
            st.sp += 16
        elif kind == "sub16":
            st.sp -= 16
        elif kind == "add16":
            st.sp += 16
        elif kind == "sd_ra_8":
            st.saved[REG_RA] = st.sp + 8
        elif kind == "sd_fp_0":
            st.saved[REG_FP] = st.sp
        elif kind == "fp_sp16":
            st.fp = st.sp + 16
        elif kind == "ld_ra_8":
            st.ra_in_reg = True
            st.stale[REG_RA] = st.saved.pop(REG_RA, None)
        elif kind == "ld_fp_0":
            st.fp = None
            st.stale[REG_FP] = st.saved.pop(REG_FP, None)
        elif kind == "mflr_r0":
            st.r0_ra = True
        elif kind == "std_r0_16":
            if st.r0_ra:
                st.saved[REG_RA] = st.sp + 16
        elif kind == "stdu32":
            st.chain = (st.sp - 32, st.sp)
            st.sp -= 32
        elif kind == "add32":
            st.sp += 32
        elif kind == "std_toc":
            st.toc_saved = True
        elif kind == "ld_toc":
            st.toc_saved = "restored" if st.toc_saved else False
        elif kind == "ld_r0_16":
            st.r0_ra = REG_RA in st.saved
        elif kind == "mtlr_r0":
            if st.r0_ra:
                st.ra_in_reg = True
                st.stale[REG_RA] = st.saved.pop(REG_RA, None)
        elif kind == "pac":
            st.ra_signed = True
        elif kind == "aut":
            st.ra_signed = False
        elif kind == "call":
            call_state = st.copy()
            if ARCH != "x86_64":
                call_state.ra_in_reg = False   # blr clobbers x30, jalr ra, bctrl LR
                st.ra_in_reg = False
        elif kind == "ret":
            break
    return rows, call_state


def check_frame_record(code):
    """The frame pointer must point at [caller FP, return address] while the
    evaluator runs (what frame-pointer unwinders need)."""
    insns = decode(code)
    rows, cs = simulate(insns)
    if cs is None:
        return ["no call instruction in the trampoline"]
    if ARCH == "ppc64le":
        return check_back_chain(rows, cs, code)
    ra_slot = 0 if ARCH == "x86_64" else cs.saved.get(REG_RA)
    if cs.fp is None:
        return ["no frame record: the trampoline does not set up its frame "
                f"pointer before calling the evaluator (code {code.hex()})"]
    errs = []
    record = cs.fp + FP_RECORD
    where = "at" if FP_RECORD == 0 else f"{-FP_RECORD} bytes below"
    if cs.saved.get(REG_FP) != record:
        errs.append(f"the caller FP is not saved {where} the frame pointer")
    if ra_slot is None or ra_slot != record + 8:
        errs.append("return address is not stored next to the saved FP")
    return errs


def check_back_chain(rows, cs, code):
    """ppc64le: at the call, r1 points at the trampoline's frame, whose first
    doubleword is the caller's r1 (E), and the return address is in the
    caller's LR save doubleword (E + 16); r2 is saved before the call and
    restored before blr."""
    errs = []
    if cs.chain != (cs.sp, 0):
        errs.append("no back chain: the trampoline does not link a frame of its "
                    f"own to its caller's (stdu) before the call (code {code.hex()})")
    if cs.saved.get(REG_RA) != 16:
        errs.append("the return address is not in the caller's LR save "
                    f"doubleword (caller's r1 + 16) at the call (code {code.hex()})")
    final = rows[-1][1] if rows else None
    if not cs.toc_saved or final is None or final.toc_saved != "restored":
        errs.append("r2 (the TOC pointer) is not saved before the call and "
                    f"restored after it (code {code.hex()})")
    return errs


def branch_protection():
    """(BTI, PAC) that -mbranch-protection in this interpreter's CFLAGS asks
    for (the last such option counts; "standard" = bti + pac-ret; PAC with
    the A key only, which is what the trampoline signs with)."""
    flags = " ".join(str(sysconfig.get_config_var(k) or "") for k in ("CFLAGS", "PY_CFLAGS"))
    values = re.findall(r"(?:^|\s)-mbranch-protection=(\S+)", flags)
    value = values[-1] if values else "none"
    parts = {"bti", "pac-ret"} if value == "standard" else set(value.split("+"))
    return "bti" in parts, "pac-ret" in parts and "b-key" not in parts


def check_branch_protection(code):
    """Part C: landing pad, and pac-ret around the saved return address."""
    if not AARCH64:
        return []
    want_bti, want_pac = branch_protection()
    insns = decode(code)
    kinds = [k for _o, _l, k in insns]
    errs = []
    if want_bti and kinds[:1] not in (["bti_c"], ["pac"]):
        errs.append("built with BTI, but the trampoline (entered by blr) does "
                    f"not start with a landing pad (bti c / paciasp): {code.hex()}")
    if want_pac:
        if "pac" not in kinds or "stp_fp_lr" in kinds and \
                kinds.index("pac") > kinds.index("stp_fp_lr"):
            errs.append("built with pac-ret, but the trampoline saves its return "
                        f"address unsigned (no paciasp before stp): {code.hex()}")
        elif "aut" not in kinds[kinds.index("pac"):]:
            errs.append("paciasp without autiasp before ret: the return "
                        f"address stays signed: {code.hex()}")
    rows, _cs = simulate(insns)
    if rows and rows[-1][2] == "ret" and rows[-1][1].ra_signed:
        errs.append(f"returns with a signed return address: {code.hex()}")
    return errs


# --------------------------------------------------------------------------
# DWARF CFI
# --------------------------------------------------------------------------

def run_cfi(instrs, caf, daf, row, stop_pc, pc=0, initial=None):
    """Execute CFI up to (not past) stop_pc; row = dict with 'cfa' and regs.
    Raises ValueError for malformed/unsupported programs."""
    off, stack = 0, []
    while off < len(instrs):
        op = instrs[off]
        off += 1
        hi, lo = op & 0xC0, op & 0x3F
        if hi == 0x40:                                   # advance_loc
            npc = pc + lo * caf
            if npc > stop_pc:
                return row
            pc = npc
        elif hi == 0x80:                                 # offset
            n, off = uleb(instrs, off)
            row[lo] = ("off", n * daf)
        elif hi == 0xC0:                                 # restore
            row.pop(lo, None)
            if initial and lo in initial:
                row[lo] = initial[lo]
        elif op == 0x00:                                 # nop
            pass
        elif op in (0x02, 0x03, 0x04):                   # advance_loc1/2/4
            size = {0x02: 1, 0x03: 2, 0x04: 4}[op]
            delta = int.from_bytes(instrs[off:off + size], "little")
            off += size
            npc = pc + delta * caf
            if npc > stop_pc:
                return row
            pc = npc
        elif op == 0x05:                                 # offset_extended
            r, off = uleb(instrs, off)
            n, off = uleb(instrs, off)
            row[r] = ("off", n * daf)
        elif op == 0x11:                                 # offset_extended_sf
            r, off = uleb(instrs, off)
            n, off = sleb(instrs, off)
            row[r] = ("off", n * daf)
        elif op == 0x06:                                 # restore_extended
            r, off = uleb(instrs, off)
            row.pop(r, None)
            if initial and r in initial:
                row[r] = initial[r]
        elif op == 0x2D and AARCH64:           # AARCH64_negate_ra_state
            row["ra_signed"] = not row.get("ra_signed", False)
        elif op in (0x07, 0x08):                         # undefined/same_value
            r, off = uleb(instrs, off)
            row[r] = ("undef",) if op == 0x07 else ("same",)
        elif op == 0x0A:
            stack.append(dict(row))
        elif op == 0x0B:
            row.clear()
            row.update(stack.pop())
        elif op == 0x0C:                                 # def_cfa
            r, off = uleb(instrs, off)
            o, off = uleb(instrs, off)
            row["cfa"] = (r, o)
        elif op == 0x0D:                                 # def_cfa_register
            r, off = uleb(instrs, off)
            row["cfa"] = (r, row["cfa"][1])
        elif op == 0x0E:                                 # def_cfa_offset
            o, off = uleb(instrs, off)
            row["cfa"] = (row["cfa"][0], o)
        elif op == 0x12:                                 # def_cfa_sf
            r, off = uleb(instrs, off)
            o, off = sleb(instrs, off)
            row["cfa"] = (r, o * daf)
        elif op == 0x13:                                 # def_cfa_offset_sf
            o, off = sleb(instrs, off)
            row["cfa"] = (row["cfa"][0], o * daf)
        else:
            raise ValueError(f"unsupported/invalid CFA opcode {op:#04x}")
    return row


def parse_ehframe(eh):
    """Return (cie, fde) dicts; offsets are relative to the start of eh."""
    length, cie_id = struct.unpack_from("<II", eh, 0)
    if cie_id != 0:
        raise ValueError("first .eh_frame entry is not a CIE")
    cie_end = 4 + length
    if eh[8] != 1:
        raise ValueError(f"CIE version {eh[8]}")
    aug_end = eh.index(b"\0", 9)
    aug = eh[9:aug_end].decode()
    off = aug_end + 1
    caf, off = uleb(eh, off)
    daf, off = sleb(eh, off)
    ra, off = eh[off], off + 1
    enc = None
    if aug.startswith("z"):
        alen, off = uleb(eh, off)
        adata = eh[off:off + alen]
        off += alen
        if "R" in aug:
            enc = adata[aug.index("R") - 1]
    cie = dict(caf=caf, daf=daf, ra=ra, aug=aug, enc=enc,
               instrs=eh[off:cie_end], end=cie_end)
    f0 = cie_end
    flen, cie_ptr = struct.unpack_from("<II", eh, f0)
    if flen == 0:
        raise ValueError("no FDE")
    if f0 + 4 - cie_ptr != 0:
        raise ValueError("FDE does not point back at the CIE")
    if enc != 0x1B:
        raise ValueError(f"unexpected FDE pointer encoding {enc!r} "
                         "(expected pcrel|sdata4)")
    pc_field = f0 + 8
    pc_rel, pc_range = struct.unpack_from("<iI", eh, pc_field)
    off = pc_field + 8
    if "z" in aug:
        alen, off = uleb(eh, off)
        off += alen
    fde = dict(start=f0, end=f0 + 4 + flen, pc_field=pc_field, pc_rel=pc_rel,
               pc_range=pc_range, instrs=eh[off:f0 + 4 + flen])
    return cie, fde


def check_unwind(eh, hdr, code):
    errs = []
    try:
        cie, fde = parse_ehframe(eh)
    except (ValueError, IndexError, struct.error) as exc:
        return [f"malformed .eh_frame: {exc}"]
    exp_caf = CODE_ALIGN
    if cie["caf"] != exp_caf:
        errs.append(f"CIE code alignment factor {cie['caf']}, expected "
                    f"{exp_caf} for {ARCH}")
    if cie["daf"] != -8:
        errs.append(f"CIE data alignment factor {cie['daf']}, expected -8")
    if cie["ra"] != REG_RA:
        errs.append(f"CIE return address column {cie['ra']}, expected {REG_RA}")
    # Synthesized DSO: code at 0, .eh_frame at round_up(code_size, 8),
    # .eh_frame_hdr right after .eh_frame.
    eh_base = (len(code) + 7) & ~7
    target = eh_base + fde["pc_field"] + fde["pc_rel"]
    if target != 0:
        errs.append(f"FDE initial location points {target:+d} bytes from the "
                    f"code start (value {fde['pc_rel']:#x})")
    if fde["pc_range"] != len(code):
        errs.append(f"FDE covers {fde['pc_range']} bytes, code is {len(code)}")
    # .eh_frame_hdr
    if len(hdr) >= 20:
        ver, ptr_enc, cnt_enc, tab_enc = hdr[:4]
        eh_ptr, count, t_from, t_to = struct.unpack_from("<iIii", hdr, 4)
        hdr_base = eh_base + len(eh)
        if (ver, ptr_enc, cnt_enc, tab_enc) != (1, 0x1B, 0x03, 0x3B):
            errs.append(f"unexpected .eh_frame_hdr encodings {hdr[:4].hex()}")
        else:
            if hdr_base + 4 + eh_ptr != eh_base:
                errs.append(".eh_frame_hdr eh_frame_ptr does not point at .eh_frame")
            if count != 1:
                errs.append(f".eh_frame_hdr fde_count {count}")
            if hdr_base + t_from != 0:
                errs.append(".eh_frame_hdr table initial location is not the code start")
            if hdr_base + t_to != eh_base + fde["start"]:
                errs.append(".eh_frame_hdr table does not point at the FDE")
    else:
        errs.append(f".eh_frame_hdr too short ({len(hdr)} bytes)")

    # Evaluate the CFI against the simulated trampoline.
    try:
        insns = decode(code)
    except ValueError as exc:
        return errs + [str(exc)]
    rows, call_state = simulate(insns)
    try:
        init = run_cfi(cie["instrs"], cie["caf"], cie["daf"], {}, stop_pc=0)
    except (ValueError, IndexError) as exc:
        return errs + [f"CIE initial instructions: {exc}"]
    checks = [(off, st, f"+{off} ({kind})") for off, st, kind in rows]
    if call_state is not None:
        call_off = [o for o, _l, k in insns if k == "call"][0]
        # Unwinders look up return_address - 1, i.e. inside the call insn.
        checks.append((call_off, call_state, f"call site +{call_off}"))
    for pc, st, where in checks:
        try:
            row = run_cfi(fde["instrs"], cie["caf"], cie["daf"], dict(init),
                          stop_pc=pc, initial=init)
        except (ValueError, IndexError, KeyError) as exc:
            errs.append(f"FDE CFI program is malformed: {exc!r}")
            break
        problems = []
        reg, cfa_off = row.get("cfa", (None, 0))
        if reg == REG_SP:
            cfa = st.sp + cfa_off
        elif reg == REG_FP and st.fp is not None:
            cfa = st.fp + cfa_off
        else:
            cfa = None
        if cfa != TRUE_CFA:
            problems.append(f"CFA rule {row.get('cfa')} gives "
                            f"{'?' if cfa is None else cfa:}, expected {TRUE_CFA}")
        # Return address.
        ra_rule = row.get(REG_RA)
        if ARCH == "x86_64" or not st.ra_in_reg:
            want = 0 if ARCH == "x86_64" else st.saved.get(REG_RA)
            if not (ra_rule and ra_rule[0] == "off" and
                    TRUE_CFA + ra_rule[1] == want):
                problems.append(f"return address rule {ra_rule}, RA is at E{want:+d}"
                                if want is not None else
                                f"return address rule {ra_rule}")
        elif ra_rule not in (None, ("same",)) and not (
                ra_rule[0] == "off" and TRUE_CFA + ra_rule[1] in
                (st.saved.get(REG_RA), st.stale.get(REG_RA))):
            problems.append(f"return address rule {ra_rule} but RA is still in its register")
        # Frame pointer.
        fp_rule = row.get(REG_FP)
        if st.fp is not None:
            if not (fp_rule and fp_rule[0] == "off" and
                    st.saved.get(REG_FP) == TRUE_CFA + fp_rule[1]):
                problems.append(f"frame pointer rule {fp_rule}, caller FP is "
                                f"saved at E{st.saved.get(REG_FP)}")
        elif fp_rule and fp_rule[0] == "off" and TRUE_CFA + fp_rule[1] not in \
                (st.saved.get(REG_FP), st.stale.get(REG_FP)):
            problems.append(f"frame pointer rule {fp_rule} points at a slot "
                            "that does not hold the caller FP")
        # Return address sign state (aarch64 pac-ret).
        if bool(row.get("ra_signed")) != st.ra_signed:
            problems.append("RA_SIGN_STATE " + ("1 (signed)" if row.get("ra_signed") else "0")
                            + " but the return address is "
                            + ("signed" if st.ra_signed else "not signed"))
        if problems:
            errs.append(f"CFI row at {where}: " + "; ".join(problems))
    return errs


def parse_jitdump(data):
    """Yield (eh_frame, eh_frame_hdr, code, name) per trampoline."""
    magic, _ver, hdr_size = struct.unpack_from("<III", data, 0)
    if magic != 0x4A695444:
        raise ValueError("bad jitdump magic")
    off, pending = hdr_size, None
    while off + 16 <= len(data):
        rec_id, total = struct.unpack_from("<II", data, off)
        if total < 16 or off + total > len(data):
            break
        body = off + 16
        if rec_id == 4:                                  # unwinding info
            unwind_size, hdr_sz, _mapped = struct.unpack_from("<QQQ", data, body)
            blob = data[body + 24: body + 24 + unwind_size]
            pending = (blob[:unwind_size - hdr_sz], blob[unwind_size - hdr_sz:])
        elif rec_id == 0:                                # code load
            _pid, _tid, _vma, _addr, size, _idx = struct.unpack_from(
                "<IIQQQQ", data, body)
            name_off = body + 40
            end = data.index(b"\0", name_off)
            name = data[name_off:end].decode("utf-8", "replace")
            code = data[end + 1:end + 1 + size]
            if pending is not None:
                yield pending[0], pending[1], code, name
            pending = None
        off += total


# the bytes at the end of a jitdump load's code that 3.15+ overwrite with a per-load build-id marker
MARKER_BYTES = 8

def check_jitdump(errors, live=None):
    """Run a -X perf_jit child and validate its jitdump; return #entries.

    3.15+ write a build-id marker over the last 8 bytes of each load's code (perf would otherwise merge the
    identical DSOs perf inject makes): where a load's code is the live trampoline's (A) but for its last 8
    bytes, the live code is what is checked against the unwinding info."""
    proc = subprocess.run([sys.executable, "-Xperf_jit", "-c", CHILD_JIT],
                          capture_output=True, text=True, timeout=120)
    n_checked = 0
    if proc.returncode != 0 or "PID" not in proc.stdout:
        errors.append(f"-X perf_jit child failed ({proc.returncode}): "
                      f"{proc.stderr.strip()[-500:]}")
        return 0
    pid = proc.stdout.split("PID", 1)[1].split()[0]
    dump = f"/tmp/jit-{pid}.dump"
    try:
        with open(dump, "rb") as f:
            data = f.read()
        seen = set()
        for eh, hdr, code, name in parse_jitdump(data):
            n_checked += 1
            if (live is not None and len(code) == len(live) > MARKER_BYTES
                    and code[:-MARKER_BYTES] == live[:-MARKER_BYTES]):
                code = live
            key = (eh, hdr[:4], code)
            if key in seen and not name.startswith(f"py::{PROBE}:"):
                continue
            seen.add(key)
            errs = check_unwind(eh, hdr, code)
            try:
                errs += check_frame_record(code)
                errs += check_branch_protection(code)
            except ValueError as exc:
                errs.append(str(exc))
            for e in errs:
                msg = f"-X perf_jit {name}: {e}"
                if msg not in errors:
                    errors.append(msg)
            if len(errors) > 12:
                break
        if n_checked == 0:
            errors.append(f"{dump} has no unwinding-info/code-load pairs")
    except (OSError, ValueError, struct.error) as exc:
        errors.append(f"cannot read {dump}: {exc}")
    finally:
        try:
            os.unlink(dump)
        except OSError:
            pass
    return n_checked


def main():
    if INSNS is None:
        print(f"CANNOT CHECK: unsupported architecture {ARCH}", file=sys.stderr)
        return 2
    if sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") != 1:
        print("CANNOT CHECK: this interpreter has no perf trampoline support",
              file=sys.stderr)
        return 2
    errors = []

    # A. -X perf: live trampoline bytes
    proc = subprocess.run([sys.executable, "-Xperf", "-c", CHILD_PERF],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or "CODE" not in proc.stdout:
        errors.append(f"-X perf child failed ({proc.returncode}): "
                      f"{proc.stderr.strip()[-500:]}")
        live = None
    else:
        pid, hexcode = proc.stdout.split("CODE", 1)[1].split()[:2]
        live = bytes.fromhex(hexcode)
        try:
            os.unlink(f"/tmp/perf-{pid}.map")
        except OSError:
            pass
        try:
            for e in check_frame_record(live) + check_branch_protection(live):
                errors.append(f"-X perf trampoline: {e}")
        except ValueError as exc:
            errors.append(f"-X perf trampoline: {exc}")

    # B. -X perf_jit: jitdump unwind info (the backend exists in 3.13+)
    if sys.version_info >= (3, 13):
        n_checked = check_jitdump(errors, live)
    else:
        n_checked = None

    if errors:
        for e in errors[:12]:
            print(f"FAIL (gh-136541): {e}", file=sys.stderr)
        return 1
    jit = ("-X perf_jit not available before 3.13" if n_checked is None else
           f"{n_checked} jitdump unwind entries match the code and the "
           f"synthesized DSO layout")
    bti, pac = branch_protection() if AARCH64 else (False, False)
    bp = (f"; branch protection ({'BTI' if bti else ''}{', ' if bti and pac else ''}"
           f"{'pac-ret' if pac else ''}) checked" if bti or pac else "")
    print(f"PASS (gh-136541): {ARCH} trampoline {live.hex()} has a frame "
          f"record; {jit}{bp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
