# requires: perf_jit
# hits: gh-141579 /activate_stack_trampoline\('perf_jit'\): exit 1, .*ValueError: invalid backend: perf_jit/
# checks: behaviour
"""The jitdump's unwinding-info records, checked the way upstream's TestJitdumpFileFormat checks them.

Upstream's test_jitdump_unwinding_info (newer than 3.13.5) runs a program
under -X perf_jit without perf and checks every JIT_CODE_UNWINDING_INFO
record (id 4) of /tmp/jit-PID.dump against the JIT_CODE_LOAD record that
follows it:
  * the unwinding record is immediately followed by a code load whose name
    is NUL-terminated and whose code bytes fit in the record;
  * eh_frame_hdr_size is 20 and unwind_data_size fits in the record, with a
    non-empty .eh_frame;
  * the .eh_frame starts with a CIE (id 0, version 1, augmentation "zR")
    whose FDE pointer encoding is pc-relative sdata4 (0x1b) or absptr (0x10);
  * the FDE's address_range is the code load's code_size, and its
    initial_location points back at the code as perf inject lays it out:
    -(round_up(code_size, 8) + offset of the field in .eh_frame);
  * the .eh_frame_hdr's eh_frame_ptr field ("from" in CPython's struct)
    equals -(round_up(code_size, 8) + .eh_frame size);
  * the program's own function is among the described regions.
This check asks the same of every cell whose interpreter offers perf_jit,
for -X perf_jit and for the sys API, in a program whose functions run in
a thread too.  (check_jitdump.py checks the CFA program the FDE describes;
this one the record layout upstream now pins down.)
"""
import os
import struct
import subprocess
import sys

MAGIC = 0x4A695444
LOAD, UNWIND = 0, 4
HDR = 16
CODE_SIZE_OFF = HDR + 4 + 4 + 8 + 8
NAME_OFF = CODE_SIZE_OFF + 8 + 8
EH_FRAME_OFF = HDR + 3 * 8
EH_FRAME_HDR_SIZE = 20
EH_FRAME_HDR_FROM_OFF = 12
PCREL_SDATA4, PCREL_ABSPTR = 0x1B, 0x10

PROGRAM = r'''
import os, sys, threading
if len(sys.argv) > 1 and sys.argv[1] == "api":
    sys.activate_stack_trampoline("perf_jit")
def unwind_probe_function(n):
    return n + 1
def in_thread():
    for i in range(10):
        unwind_probe_function(i)
t = threading.Thread(target=in_thread)
t.start(); t.join()
unwind_probe_function(1)
print(os.getpid())
'''


def records(data):
    pos = struct.unpack_from("<I", data, 8)[0]
    out = []
    while pos < len(data):
        if pos + HDR > len(data):
            raise ValueError(f"truncated record header at offset {pos}")
        event, size = struct.unpack_from("<II", data, pos)
        if size < HDR or pos + size > len(data):
            raise ValueError(f"record at offset {pos} has a bad size {size}")
        out.append((event, pos, size))
        pos += size
    return out


def skip_uleb(buf, pos):
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1


def fde_encoding(eh):
    cie_length = struct.unpack_from("<I", eh, 0)[0]
    pos = 12                                   # length, CIE id, version, "zR\0"
    pos = skip_uleb(eh, pos)                   # code alignment
    pos = skip_uleb(eh, pos)                   # data alignment (sleb, same length rule)
    pos += 1                                   # return address register
    pos = skip_uleb(eh, pos)                   # augmentation data length
    if pos >= 4 + cie_length:
        raise ValueError("truncated CIE augmentation data")
    return eh[pos]


def check_dump(label, data):
    problems = []
    magic, version = struct.unpack_from("<II", data, 0)
    if (magic, version) != (MAGIC, 1):
        return [f"{label}: header magic/version {magic:#x}/{version}"]
    try:
        recs = records(data)
    except ValueError as exc:
        return [f"{label}: {exc}"]
    regions = {}
    for index, (event, pos, size) in enumerate(recs):
        if event != UNWIND:
            continue
        where = f"{label}: unwinding record at offset {pos}"
        if index + 1 >= len(recs) or recs[index + 1][0] != LOAD:
            problems.append(f"{where}: not followed by a code load")
            continue
        _, lpos, lsize = recs[index + 1]
        code_size = struct.unpack_from("<Q", data, lpos + CODE_SIZE_OFF)[0]
        name_end = data.find(b"\0", lpos + NAME_OFF, lpos + lsize)
        if name_end < 0:
            problems.append(f"{where}: the code load's name is not NUL-terminated")
            continue
        name = data[lpos + NAME_OFF:name_end].decode("utf-8", "replace")
        if name_end + 1 + code_size > lpos + lsize:
            problems.append(f"{where} ({name}): the code bytes do not fit in the load record")
        unwind_size, hdr_size = struct.unpack_from("<QQ", data, pos + HDR)
        if hdr_size != EH_FRAME_HDR_SIZE:
            problems.append(f"{where} ({name}): eh_frame_hdr_size {hdr_size}, want {EH_FRAME_HDR_SIZE}")
            continue
        if EH_FRAME_OFF + unwind_size > size:
            problems.append(f"{where} ({name}): unwind_data_size {unwind_size} overflows the record ({size})")
            continue
        eh_size = unwind_size - hdr_size
        if eh_size <= 0:
            problems.append(f"{where} ({name}): empty .eh_frame")
            continue
        eh = data[pos + EH_FRAME_OFF:pos + EH_FRAME_OFF + eh_size]
        cie_length, cie_id = struct.unpack_from("<II", eh, 0)
        if cie_id != 0 or eh[8] != 1 or eh[9:12] != b"zR\0":
            problems.append(f"{where} ({name}): the .eh_frame does not start with a version 1 'zR' CIE")
            continue
        try:
            enc = fde_encoding(eh)
        except (ValueError, IndexError) as exc:
            problems.append(f"{where} ({name}): {exc}")
            continue
        fields = {PCREL_SDATA4: "<iI", PCREL_ABSPTR: "<qQ"}.get(enc)
        if fields is None:
            problems.append(f"{where} ({name}): FDE pointer encoding {enc:#x}")
            continue
        pc_offset = 4 + cie_length + 8
        initial, address_range = struct.unpack_from(fields, eh, pc_offset)
        rounded = (code_size + 7) & ~7
        if address_range != code_size:
            problems.append(f"{where} ({name}): FDE address_range {address_range}, code_size {code_size}")
        if initial != -(rounded + pc_offset):
            problems.append(f"{where} ({name}): FDE initial_location {initial}, want {-(rounded + pc_offset)} "
                            f"(-(round_up({code_size}, 8) + {pc_offset}))")
        hdr_from = struct.unpack_from("<i", data, pos + EH_FRAME_OFF + eh_size + EH_FRAME_HDR_FROM_OFF)[0]
        if hdr_from != -(rounded + eh_size):
            problems.append(f"{where} ({name}): .eh_frame_hdr 'from' {hdr_from}, want {-(rounded + eh_size)}")
        regions[name] = code_size
    if not regions:
        problems.append(f"{label}: no unwinding-info record")
    elif not any("unwind_probe_function" in n for n in regions):
        problems.append(f"{label}: no region for py::unwind_probe_function among {len(regions)}")
    print(f"{label}: {len(regions)} region(s) with unwinding info, {len(problems)} problem(s)")
    return problems[:20]


def main():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT")}
    problems = []
    for label, argv in (("-X perf_jit", [sys.executable, "-X", "perf_jit", "-c", PROGRAM]),
                        ("sys.activate_stack_trampoline('perf_jit')", [sys.executable, "-c", PROGRAM, "api"])):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        if proc.returncode != 0 or not proc.stdout.strip():
            problems.append(f"{label}: exit {proc.returncode}, stderr {proc.stderr.strip()[-800:]!r}")
            continue
        path = f"/tmp/jit-{int(proc.stdout.split()[-1])}.dump"
        if not os.path.exists(path):
            problems.append(f"{label}: no {path}")
            continue
        with open(path, "rb") as fh:
            data = fh.read()
        os.unlink(path)
        problems += check_dump(label, data)
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("OK: every unwinding-info record describes the code load after it as upstream's test requires")
    return 0


if __name__ == "__main__":
    sys.exit(main())
