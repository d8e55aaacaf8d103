# requires: perf_jit
# hits: jitdump-fde-epilogue /^CFA state at the last instruction \(7, 8, \(\(6, -16\), \(16, -8\)\)\) differs from entry \(7, 8, \(\(16, -8\),\)\)$/
# hits: jitdump-fork-flush /unknown record id \d+ at \d+|bad record size \d+ at \d+|records do not add up to the file size/
# checks: behaviour
"""/tmp/jit-PID.dump written under -X perf_jit, parsed independently.

Checks against tools/perf/Documentation/jitdump-specification.txt:
  * header: magic 0x4A695444, version 1, total_size 40, elf_mach of this
    machine, pid of the process, JITDUMP_FLAGS_ARCH_TIMESTAMP clear
    (timestamps are CLOCK_MONOTONIC);
  * records: known ids, total_size >= 16, sizes add up to the file size
    exactly; timestamps never go backwards;
  * a JIT_CODE_UNWINDING_INFO record comes before every JIT_CODE_LOAD (and
    after the previous load); its .eh_frame has a CIE and one FDE, and, laid
    out as perf inject lays it out (text at an 8-aligned address, .eh_frame
    at text + round_up(code_size, 8), .eh_frame_hdr right after .eh_frame),
    the FDE's pc range and the .eh_frame_hdr table entry cover exactly the
    code of the load record; the FDE's CFA program ends where it started
    (at the last instruction the same CFA, return address and saved
    registers as at the first, and on aarch64 the same RA_SIGN_STATE: a
    rule left for a register the epilogue popped points below the stack
    pointer, outside the stack perf copies);
  * code loads: pid matches, vma == code_addr, an address loaded again only
    for another function (a freed code object's slot serving a new one, as
    check_jit_slot_reuse.py checks with perf), code indexes increase, names are "py::<qualname>:<filename>", the script's
    functions are present, code bytes identical for all loads (but for a
    build-id marker in their last 8 bytes, as 3.15 writes);
  * the dump is mapped executable in the running process (the marker
    perf inject --jit keys on), and under sys.activate_stack_trampoline
    ("perf_jit") too (gh-141579);
  * after fork the child writes its own dump with its own functions.
"""
import json
import os
import platform
import struct
import subprocess
import sys

from childcheck import sleb, uleb

MAGIC = 0x4A695444
EM = {"x86_64": 62, "aarch64": 183, "riscv64": 243, "ppc64le": 21}   # EM_X86_64, EM_AARCH64, EM_RISCV, EM_PPC64
JIT_CODE_LOAD, JIT_CODE_MOVE, JIT_CODE_DEBUG_INFO, JIT_CODE_CLOSE, JIT_CODE_UNWINDING_INFO = range(5)
# aarch64's RA_SIGN_STATE pseudo-register (DWARF register 34), toggled by
# DW_CFA_AARCH64_negate_ra_state where the trampoline signs its return
# address (pac-ret: paciasp ... autiasp)
RA_SIGN_STATE = 34
# the bytes at the end of a load's code that 3.15+ overwrite with a per-load build-id marker
BUILD_ID_MARKER = 8

CHILD = r'''
import json, os, sys
def leaf(n):
    return n + 1
def middle(n):
    return leaf(n)
middle(1)
maps = open("/proc/self/maps").read()
marker = [l for l in maps.splitlines() if l.endswith("/tmp/jit-%d.dump" % os.getpid())]
child = None
if sys.argv[1] == "fork":
    pid = os.fork()
    if pid == 0:
        def child_only(n):
            return n * 2
        child_only(1)
        leaf(2)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    child = {"pid": pid, "status": status}
    def parent_only(n):
        return n
    parent_only(1)
print(json.dumps({"pid": os.getpid(), "marker": marker, "child": child,
                  "file": __file__ if "__file__" in globals() else "<string>"}))
'''

SYS_ACTIVATE = r'''
import json, os, sys
sys.activate_stack_trampoline("perf_jit")
def via_sys_api(n):
    return n
via_sys_api(1)
maps = open("/proc/self/maps").read()
marker = [l for l in maps.splitlines() if l.endswith("/tmp/jit-%d.dump" % os.getpid())]
print(json.dumps({"pid": os.getpid(), "marker": marker,
                  "active": sys.is_stack_trampoline_active()}))
'''


class Fail(Exception):
    pass


def cfa_states(prog, code_align, data_align, initial=None):
    """Run a CFA program; return {location: (cfa_reg, cfa_off, saved)}."""
    state = dict(initial or {"reg": None, "off": 0, "saved": {}})
    state["saved"] = dict(state["saved"])
    init_saved = dict(state["saved"])
    loc = 0
    rows = {0: None}
    i = 0
    def snap():
        return (state["reg"], state["off"], tuple(sorted(state["saved"].items())))
    def restore(reg):           # DW_CFA_restore and restore_extended: the CIE's rule again
        if reg in init_saved:
            state["saved"][reg] = init_saved[reg]
        else:
            state["saved"].pop(reg, None)
    while i < len(prog):
        op = prog[i]
        i += 1
        hi, lo = op & 0xC0, op & 0x3F
        if hi == 0x40:          # advance_loc
            rows[loc] = snap()
            loc += lo * code_align
        elif hi == 0x80:        # offset
            off, i = uleb(prog, i)
            state["saved"][lo] = off * data_align
        elif hi == 0xC0:        # restore
            restore(lo)
        elif op == 0x00:        # nop
            pass
        elif op == 0x11:        # offset_extended_sf (ppc64le: LR, register 65, above the CFA)
            reg, i = uleb(prog, i)
            off, i = sleb(prog, i)
            state["saved"][reg] = off * data_align
        elif op == 0x06:        # restore_extended
            reg, i = uleb(prog, i)
            restore(reg)
        elif op == 0x0C:        # def_cfa
            state["reg"], i = uleb(prog, i)
            state["off"], i = uleb(prog, i)
        elif op == 0x0D:        # def_cfa_register
            state["reg"], i = uleb(prog, i)
        elif op == 0x0E:        # def_cfa_offset
            state["off"], i = uleb(prog, i)
        elif op == 0x2D and platform.machine() in ("aarch64", "arm64"):
            # DW_CFA_AARCH64_negate_ra_state (GNU_window_save elsewhere)
            if state["saved"].pop(RA_SIGN_STATE, 0) == 0:
                state["saved"][RA_SIGN_STATE] = 1
        elif op == 0x02:        # advance_loc1
            rows[loc] = snap()
            loc += prog[i] * code_align
            i += 1
        else:
            raise Fail(f"unexpected CFA opcode {op:#x}")
    rows[loc] = snap()
    return rows, state


def check_unwind(data, eh_hdr_size, code_size):
    eh_size = len(data) - eh_hdr_size
    eh, hdr = data[:eh_size], data[eh_size:]
    # CIE
    (cie_len, cie_id) = struct.unpack_from("<II", eh, 0)
    if cie_id != 0:
        raise Fail("first .eh_frame entry is not a CIE")
    i = 8
    version = eh[i]; i += 1
    end = eh.index(b"\0", i)
    aug = eh[i:end].decode(); i = end + 1
    code_align, i = uleb(eh, i)
    data_align, i = sleb(eh, i)
    if version == 1:
        ra = eh[i]; i += 1
    else:
        ra, i = uleb(eh, i)
    fde_enc = 0
    if aug.startswith("z"):
        auglen, i = uleb(eh, i)
        augdata = eh[i:i + auglen]
        i += auglen
        if "R" in aug:
            fde_enc = augdata[aug[1:].index("R")]
    cie_end = 4 + cie_len
    init_rows, init_state = cfa_states(eh[i:cie_end], code_align, data_align)
    # FDE
    fde_off = cie_end
    fde_len, cie_ptr = struct.unpack_from("<II", eh, fde_off)
    if fde_off + 4 - cie_ptr != 0:
        raise Fail("FDE does not point back to the CIE")
    if fde_enc != 0x1B:
        raise Fail(f"unexpected FDE pointer encoding {fde_enc:#x}")
    pc_field = fde_off + 8
    pc_rel, pc_range = struct.unpack_from("<iI", eh, pc_field)
    j = pc_field + 8
    if "z" in aug:
        alen, j = uleb(eh, j)
        j += alen
    rows, final = cfa_states(eh[j:fde_off + 4 + fde_len], code_align, data_align, init_state)
    # perf inject's layout: text at T (8-aligned), eh_frame at T + align8(code_size)
    text_to_eh = (code_size + 7) & ~7
    pc_begin_rel_text = text_to_eh + pc_field + pc_rel     # relative to T
    if pc_begin_rel_text != 0:
        raise Fail(f"FDE pc_begin points {pc_begin_rel_text:+d} bytes from the code start")
    if pc_range != code_size:
        raise Fail(f"FDE pc_range {pc_range} != code size {code_size}")
    # .eh_frame_hdr
    ver, ptr_enc, cnt_enc, tab_enc = hdr[0], hdr[1], hdr[2], hdr[3]
    if (ver, ptr_enc, cnt_enc, tab_enc) != (1, 0x1B, 0x03, 0x3B):
        raise Fail(f"unexpected .eh_frame_hdr encodings {(ver, ptr_enc, cnt_enc, tab_enc)}")
    eh_ptr, count, initial_loc, fde_addr = struct.unpack_from("<iIii", hdr, 4)
    if eh_size + 4 + eh_ptr != 0:
        raise Fail(".eh_frame_hdr eh_frame_ptr does not point to .eh_frame")
    if count != 1:
        raise Fail(f".eh_frame_hdr fde_count {count} != 1")
    if eh_size + initial_loc + text_to_eh != 0:
        raise Fail(".eh_frame_hdr table initial location is not the code start")
    if eh_size + fde_addr != fde_off:
        raise Fail(".eh_frame_hdr table does not point to the FDE")
    # the CFA rule at the last instruction must equal the entry rule
    first = rows[0] if rows.get(0) else (init_state["reg"], init_state["off"],
                                          tuple(sorted(init_state["saved"].items())))
    last_loc = max(rows)
    if last_loc >= code_size:
        raise Fail(f"CFA program advances past the code ({last_loc} >= {code_size})")
    if rows[last_loc] != first:
        # a register rule left standing after the epilogue's pop (rbp at CFA-16 at the ret) points below the
        # stack pointer: perf copies the stack from the stack pointer up, so its unwinder cannot read the
        # saved value there and loses the caller's frame pointer in a sample at the ret
        raise Fail(f"CFA state at the last instruction {rows[last_loc]} differs from entry {first}")
    # in the middle (during the call) the CFA must be defined and RA findable
    return {"cie": cie_end, "eh_frame": eh_size, "rows": len(rows), "ra": ra}


def parse(path, pid):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 40:
        raise Fail(f"{path}: {len(data)} bytes, no header")
    magic, version, total, mach, pad, hpid, ts, flags = struct.unpack_from("<IIIIIIQQ", data, 0)
    if magic != MAGIC:
        raise Fail(f"bad magic {magic:#x}")
    if version != 1 or total != 40:
        raise Fail(f"version {version} / header size {total}")
    want_mach = EM.get(platform.machine())
    if mach != want_mach:
        raise Fail(f"elf_mach {mach} != {want_mach}")
    if hpid != pid:
        raise Fail(f"header pid {hpid} != {pid}")
    if flags & 1:
        raise Fail("JITDUMP_FLAGS_ARCH_TIMESTAMP set; expected CLOCK_MONOTONIC timestamps")
    off = total
    last_ts = 0
    pending_unwind = None
    loads = []
    code_bytes = set()
    while off < len(data):
        if off + 16 > len(data):
            raise Fail(f"truncated record header at {off}")
        rid, size, rts = struct.unpack_from("<IIQ", data, off)
        if rid > JIT_CODE_UNWINDING_INFO:
            raise Fail(f"unknown record id {rid} at {off}")
        if size < 16 or off + size > len(data):
            raise Fail(f"bad record size {size} at {off}")
        if rts < last_ts:
            raise Fail(f"timestamp goes backwards at {off}")
        last_ts = rts
        body = data[off + 16:off + size]
        if rid == JIT_CODE_UNWINDING_INFO:
            usize, hsize, msize = struct.unpack_from("<QQQ", body, 0)
            if 24 + usize > len(body) or hsize >= usize or msize < usize:
                raise Fail(f"inconsistent unwinding record at {off}")
            if size % 8:
                raise Fail("unwinding record not padded to 8 bytes")
            pending_unwind = (body[24:24 + usize], hsize)
        elif rid == JIT_CODE_LOAD:
            rpid, tid, vma, addr, csize, index = struct.unpack_from("<IIQQQQ", body, 0)
            end = body.index(b"\0", 40)
            name = body[40:end].decode()
            code = body[end + 1:]
            if len(code) != csize:
                raise Fail(f"code load {name}: {len(code)} code bytes, header says {csize}")
            if rpid != pid or vma != addr:
                raise Fail(f"code load {name}: pid {rpid} / vma {vma:#x} addr {addr:#x}")
            if not name.startswith("py::"):
                raise Fail(f"code load name {name!r}")
            if pending_unwind is None:
                raise Fail(f"no unwinding info before the code load of {name}")
            check_unwind(pending_unwind[0], pending_unwind[1], csize)
            pending_unwind = None
            loads.append((name, addr, index, csize))
            code_bytes.add(bytes(code))
        off += size
    if off != len(data):
        raise Fail("records do not add up to the file size")
    by_address = {}
    for name, addr, index, _csize in loads:
        by_address.setdefault(addr, []).append(name)
    shared = {hex(a): names for a, names in by_address.items() if len(names) > 1}
    if shared:
        print(f"reused slots: {shared}")
    for addr, names in by_address.items():
        # a slot serves again only after its code object was freed: never twice for one name in a row
        if any(a == b for a, b in zip(names, names[1:])):
            raise Fail(f"two code loads in a row name {names[0]} at {addr:#x}")
    idx = [l[2] for l in loads]
    if idx != sorted(idx) or len(set(idx)) != len(idx):
        raise Fail("code indexes do not increase")
    if len(code_bytes) > 1:
        # 3.15+ write a build-id marker over the last 8 bytes of each load's code, so that perf does not take
        # two loads' DSOs for one: the code before it must still be the same
        heads = {c[:-BUILD_ID_MARKER] for c in code_bytes}
        if len(heads) > 1 or min(len(c) for c in code_bytes) <= BUILD_ID_MARKER:
            raise Fail("code loads carry different machine code")
        print(f"{len(code_bytes)} loads differ in their last {BUILD_ID_MARKER} bytes only (a build-id marker)")
    return loads


def main():
    try:
        proc = subprocess.run([sys.executable, "-X", "perf_jit", "-c", CHILD, "fork"],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise Fail(f"-X perf_jit child exited {proc.returncode}: {proc.stderr}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        if not res["marker"]:
            raise Fail("the dump file is not mapped in the process (perf inject marker)")
        if not any(l.split()[1].startswith("r-x") for l in res["marker"]):
            raise Fail(f"marker mapping is not read+exec: {res['marker']}")
        path = f"/tmp/jit-{res['pid']}.dump"
        loads = parse(path, res["pid"])
        os.unlink(path)
        names = [l[0] for l in loads]
        for fn in ("leaf", "middle", "<module>", "parent_only"):
            if f"py::{fn}:<string>" not in names:
                raise Fail(f"no code load for {fn}")
        if any("child_only" in n for n in names):
            raise Fail("parent dump has the child's function")
        if res["child"]["status"] != 0:
            raise Fail(f"forked child ended with status {res['child']['status']:#x}")
        cpath = f"/tmp/jit-{res['child']['pid']}.dump"
        if not os.path.exists(cpath):
            raise Fail("forked child wrote no dump of its own")
        cloads = parse(cpath, res["child"]["pid"])
        os.unlink(cpath)
        cnames = [l[0] for l in cloads]
        if "py::child_only:<string>" not in cnames or "py::leaf:<string>" not in cnames:
            raise Fail(f"child dump lacks its functions: {cnames}")
        if "py::parent_only:<string>" in cnames:
            raise Fail("child dump has the parent's function")
        print(f"ok   -X perf_jit: {len(loads)} code loads, each after its unwinding info; "
              f"child dump {len(cloads)} loads")

        proc = subprocess.run([sys.executable, "-c", SYS_ACTIVATE],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise Fail(f"sys.activate_stack_trampoline('perf_jit') failed (gh-141579?): "
                       f"{proc.stderr.strip().splitlines()[-1:]}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        path = f"/tmp/jit-{res['pid']}.dump"
        if not res["active"] or not res["marker"] or not os.path.exists(path):
            raise Fail(f"sys API perf_jit: active={res['active']} marker={res['marker']}")
        loads = parse(path, res["pid"])
        os.unlink(path)
        if "py::via_sys_api:<string>" not in [l[0] for l in loads]:
            raise Fail("sys API perf_jit: no code load for via_sys_api")
        print(f"ok   sys.activate_stack_trampoline('perf_jit'): {len(loads)} code loads")

        # perf_jit wins over perf when both are requested
        probe = "import os; print(os.getpid())"
        for args, env in ((["-X", "perf", "-X", "perf_jit"], {}),
                          (["-X", "perf"], {"PYTHON_PERF_JIT_SUPPORT": "1"}),
                          ([], {"PYTHONPERFSUPPORT": "1", "PYTHON_PERF_JIT_SUPPORT": "1"})):
            proc = subprocess.run([sys.executable, *args, "-c", probe], capture_output=True,
                                  text=True, timeout=120, env=dict(os.environ, **env))
            pid = proc.stdout.strip()
            jit, pmap = f"/tmp/jit-{pid}.dump", f"/tmp/perf-{pid}.map"
            got = (os.path.exists(jit), os.path.exists(pmap))
            for f in (jit, pmap):
                if os.path.exists(f):
                    os.unlink(f)
            if proc.returncode != 0 or got != (True, False):
                raise Fail(f"{args} {env}: jitdump/perf map exist = {got}, want (True, False)")
        print("ok   perf_jit wins over perf (-X and environment)")
    except Fail as exc:
        print("FAIL:", exc)
        return 1
    print("OK: jitdump well formed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
