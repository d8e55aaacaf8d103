"""What the image of a cell must be: its interpreter, its flags, its perf."""

from __future__ import annotations

import json
import re

import pytest

from cpython_perf.record import perf_runs

from conftest import not_applicable

PROBE = r"""
import json, platform, shutil, sys, sysconfig
keys = ["PY_HAVE_PERF_TRAMPOLINE", "CFLAGS", "PY_CFLAGS", "CONFIG_ARGS", "MULTIARCH"]
print(json.dumps({"version": sys.version.split()[0], "executable": shutil.which("python3"),
                  "machine": platform.machine(), "multiarch": getattr(sys.implementation, "_multiarch", None),
                  "pointer_bits": 8 * __import__("struct").calcsize("P"),
                  **{k: sysconfig.get_config_var(k) for k in keys}}))
"""


def probe(runner):
    result = runner.run(["python3", "-c", PROBE], perf=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_interpreter_is_the_cells(cell, runner_for):
    info = probe(runner_for(cell, perf=False))
    assert info["version"] == cell.recipe.version
    assert info["executable"] == "/opt/cpython/bin/python3"
    machine = cell.arch_facts.machine   # uname -m: i686 for i386 (its images run under setarch i686)
    assert info["machine"] == machine, f"the interpreter runs as {info['machine']}, the cell is {cell.arch} ({machine})"


def test_platform_triplet(cell, runner_for):
    """CPython's PLATFORM_TRIPLET (sys.implementation._multiarch, sysconfig MULTIARCH) names the cell's arch:
    i386-linux-gnu for i386, whose build must not have taken the 64-bit kernel's uname for its own."""
    info = probe(runner_for(cell, perf=False))
    expected = cell.arch_facts.platform_triplet
    assert info["multiarch"] == expected, f"sys.implementation._multiarch is {info['multiarch']!r}"
    assert info["MULTIARCH"] == expected, f"sysconfig MULTIARCH is {info['MULTIARCH']!r}"
    assert info["pointer_bits"] == cell.arch_facts.pointer_bits, f"{info['pointer_bits']}-bit pointers"


def test_perf_trampoline_configured(cell, runner_for):
    """PY_HAVE_PERF_TRAMPOLINE = 1 exactly where the cell claims a perf mode."""
    info = probe(runner_for(cell, perf=False))
    if cell.modes:
        assert info["PY_HAVE_PERF_TRAMPOLINE"] == 1, f"sysconfig says {info['PY_HAVE_PERF_TRAMPOLINE']!r}"
    else:
        assert info["PY_HAVE_PERF_TRAMPOLINE"] in (None, 0), "a cell that claims no mode has the trampoline"


def test_variant_flags(cell, runner_for):
    info = probe(runner_for(cell, perf=False))
    cflags = f"{info['CFLAGS']} {info['PY_CFLAGS']}"
    for flag in cell.cflags.split():   # the variant's, then matrix.yaml's arch_cflags
        assert flag in cflags.split(), f"{flag} missing from sysconfig CFLAGS: {cflags}"
    for option in cell.variant.configure_args(cell.version):   # e.g. distro's --enable-optimizations --with-lto
        assert option in info["CONFIG_ARGS"], f"{option} missing from CONFIG_ARGS {info['CONFIG_ARGS']}"
    if "-fno-omit-frame-pointer" not in cell.variant.cflags:
        if not cell.variant.configure_args(cell.version) and cell.version in ("3.9", "3.10", "3.11", "3.12", "3.13"):
            assert "-fno-omit-frame-pointer" not in cflags.split(), "frame pointers on in a no-frame-pointer variant"


@pytest.mark.needs_perf
def test_perf_is_new_enough(cell, runner_for):
    """perf inject --jit needs perf >= 6.8 (the howto's note)."""
    result = runner_for(cell, perf=False).run(["perf", "version"], perf=False)
    m = re.search(r"perf version (\d+)\.(\d+)", result.stdout)
    assert m, result.stdout + result.stderr
    assert (int(m.group(1)), int(m.group(2))) >= (6, 8), result.stdout


# --------------------------------------------------------------------------
# Branch protection: the GNU property note of the interpreter (readelf -n)

BINARIES_PROBE = r"""
import json, os, sys, sysconfig
files = [os.path.realpath(sys.executable)]
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    files.append(os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")))
print(json.dumps(files))
"""


def interpreter_binaries(runner) -> list[str]:
    """The interpreter's executable, and libpython where the build is shared (BINARIES_PROBE)."""
    result = runner.run(["python3", "-c", BINARIES_PROBE], perf=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# "Properties: AArch64 feature: BTI, PAC" (on the note's own line with readelf -W)
_AARCH64_FEATURE = re.compile(r"Properties:.*?AArch64 feature: ([^\n]*)$", re.M)


def branch_protection_features(cflags: str) -> set[str]:
    """The AArch64 feature properties (readelf's names) that -mbranch-protection in cflags asks for: the
    last such option counts; "standard" is bti + pac-ret.  PAC only with the A key: the trampoline signs
    with paciasp (Python/asm_trampoline.S), and leaves the B key out, so the link drops PAC there."""
    value = None
    for flag in cflags.split():
        if flag.startswith("-mbranch-protection="):
            value = flag.split("=", 1)[1]
    if value in (None, "none"):
        return set()
    parts = {"bti", "pac-ret"} if value == "standard" else set(value.split("+"))
    features = {"BTI"} if "bti" in parts else set()
    if "pac-ret" in parts and "b-key" not in parts:
        features.add("PAC")
    return features


def aarch64_features(readelf_output: str) -> set[str] | None:
    """The features of readelf -n's "AArch64 feature: BTI, PAC" property line; None without that line."""
    lines = _AARCH64_FEATURE.findall(readelf_output)
    if not lines:
        return None
    assert len(lines) == 1, f"more than one AArch64 feature property: {lines}"
    return {f.strip() for f in lines[0].split(",") if f.strip()}


def test_branch_protection_kept(cell, runner_for, record_property):
    """Built with -mbranch-protection (matrix.yaml arch_cflags: aarch64), the interpreter (and libpython,
    where shared) keeps the BTI and PAC properties, which the linker ANDs over every object: one object
    without them (the trampoline's assembly, if it lacked its note) drops them for the whole binary.
    On a vanilla twin of a native version the released Python/asm_trampoline.S has no aarch64 note:
    there the gap must show (3.13.5: fixed by patches/3.13/0007)."""
    expected = branch_protection_features(cell.cflags)
    if not expected:
        not_applicable("cflag:-mbranch-protection", f"{cell.name} is not built with -mbranch-protection (CFLAGS: {cell.cflags or 'none'})")
    runner = runner_for(cell, perf=False)
    found = {}
    for path in interpreter_binaries(runner):
        out = runner.run(["readelf", "-n", "-W", path], perf=False)
        assert out.exit_code == 0, f"readelf -n {path}: {out.stderr}"
        found[path] = aarch64_features(out.stdout)
        record_property(f"aarch64_feature {path}", ", ".join(sorted(found[path] or ())) or "none")
        print(f"{path}: AArch64 feature: {', '.join(sorted(found[path])) if found[path] else '(no property)'}")
    if cell.vanilla and cell.backends:
        assert any(not expected <= (features or set()) for features in found.values()), (
            f"{cell.name} ({cell.recipe.version} as released) keeps {sorted(expected)} although its "
            f"Python/asm_trampoline.S has no aarch64 property note: {found}")
        return
    for path, features in found.items():
        assert features is not None, f"{path} has no AArch64 feature property (readelf -n): BTI and PAC dropped"
        assert expected <= features, (
            f"{path}: AArch64 feature: {', '.join(sorted(features))}; expected {', '.join(sorted(expected))}")


# --------------------------------------------------------------------------
# Control-flow protection on x86-64 (-fcf-protection): the GNU property note
# "x86 feature: IBT, SHSTK" of every object, and endbr64 where hand-written
# assembly is entered by an indirect call

# "Properties: x86 feature: IBT, SHSTK" (readelf -n -W; the ISA properties may share the line)
_X86_FEATURE = re.compile(r"x86 feature: ([A-Z0-9_, ]+)")


def cf_protection_features(cflags: str) -> set[str]:
    """The x86 feature properties (readelf's names) that -fcf-protection in cflags asks for: the last such
    option counts; bare -fcf-protection is "full", branch protection (IBT) and return protection (SHSTK)."""
    value = None
    for flag in cflags.split():
        if flag == "-fcf-protection":
            value = "full"
        elif flag.startswith("-fcf-protection="):
            value = flag.split("=", 1)[1]
    return {"full": {"IBT", "SHSTK"}, "branch": {"IBT"}, "return": {"SHSTK"}}.get(value, set())


def x86_features(readelf_output: str) -> set[str] | None:
    """The features of readelf -n's "x86 feature: IBT, SHSTK" property; None without one."""
    found = _X86_FEATURE.findall(readelf_output)
    if not found:
        return None
    assert len(found) == 1, f"more than one x86 feature property: {found}"
    return {f.strip() for f in found[0].split(",") if f.strip()}


# The objects whose code is written by hand (the trampoline, the loop's assembly entries of the frame
# records) or that generate code at run time, as the cell's own Makefile compiles them
CF_PROTECTION_OBJECTS = ["Python/asm_trampoline.o", "Python/ceval.o", "Python/perf_trampoline.o",
                         "Python/perf_jit_trampoline.o"]
# The C library's start files, linked into every program: the linker ANDs their properties in too
C_START_FILES = ["/usr/lib/x86_64-linux-gnu/Scrt1.o", "/usr/lib/x86_64-linux-gnu/crti.o",
                 "/usr/lib/x86_64-linux-gnu/crtn.o"]
# Hand-written assembly that C reaches through a function pointer: under IBT each entry must begin with
# endbr64.  The trampoline is called through the code object's entry; with frame records, the symbol
# _PyEval_EvalFrameDefault holds the loop's two entries (the interpreter's evaluator, and at a local label
# the one the trampolines are given), each opening its frame with push %rbp
TRAMPOLINE_START = "_Py_trampoline_func_start"
EVAL_ENTRIES = perf_runs.EVAL_FUNCTION
FRAME_RECORDS_PROBE = ("import sysconfig; "
                       "print('-DPy_PERF_FRAME_RECORDS' in (sysconfig.get_config_var('CEVAL_FRAME_RECORDS_CFLAGS') or ''))")


def _needs_cf_protection(cell) -> set[str]:
    expected = cf_protection_features(cell.cflags)
    if not expected:
        not_applicable("cflag:-fcf-protection", f"{cell.name} is not built with -fcf-protection (CFLAGS: {cell.cflags or 'none'})")
    return expected


def test_cf_protection_in_every_object_of_ours(cell, runner_for, record_property):
    """Built with -fcf-protection, the objects with hand-written or run-time code carry the IBT and SHSTK
    properties: the linker ANDs them over every object, so one object without them (an assembly file
    without its note) leaves the whole interpreter unmarked, and the kernel then runs it without shadow
    stacks.  The objects are compiled again in the image's built tree by its own Makefile (the image keeps
    the tree, not its object files)."""
    expected = _needs_cf_protection(cell)
    tree = f"/usr/src/{cell.recipe.srcdir}"
    script = (f"cd {tree} && make {' '.join(CF_PROTECTION_OBJECTS)} >/tmp/make.log 2>&1 || {{ tail -30 /tmp/make.log; exit 1; }}; "
              + "; ".join(f"echo '== {o}'; readelf -n -W {o}" for o in CF_PROTECTION_OBJECTS))
    result = runner_for(cell, perf=False).run(["sh", "-c", script], perf=False)
    assert result.exit_code == 0, f"make {' '.join(CF_PROTECTION_OBJECTS)} in {tree}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    sections = re.split(r"^== (\S+)\n", result.stdout, flags=re.M)[1:]
    found = {path: x86_features(text) for path, text in zip(sections[::2], sections[1::2])}
    assert set(found) == set(CF_PROTECTION_OBJECTS), f"readelf output for {sorted(found)}, expected {CF_PROTECTION_OBJECTS}"
    for path, features in found.items():
        record_property(f"x86_feature {path}", ", ".join(sorted(features or ())) or "none")
        print(f"{path}: x86 feature: {', '.join(sorted(features)) if features else '(no property)'}")
    missing = {path: sorted(expected - (features or set())) for path, features in found.items() if not expected <= (features or set())}
    assert not missing, f"objects without the x86 feature properties -fcf-protection asks for: {missing}"


def test_cf_protection_kept_in_the_interpreter(cell, runner_for, record_property):
    """The linked interpreter (and libpython, where shared) keeps IBT and SHSTK.  Where the C library's
    own start files carry no such property (Debian trixie's: no program linked there is marked, /bin/ls
    included), the link cannot keep it, and the test says so as not applicable; the objects of ours are
    checked by test_cf_protection_in_every_object_of_ours either way."""
    expected = _needs_cf_protection(cell)
    runner = runner_for(cell, perf=False)
    libc = {}
    for path in C_START_FILES:
        out = runner.run(["readelf", "-n", "-W", path], perf=False)
        assert out.exit_code == 0, f"readelf -n {path}: {out.stderr}"
        libc[path] = x86_features(out.stdout) or set()
    unmarked = [path for path, features in libc.items() if not expected <= features]
    if unmarked:
        not_applicable("libc:cf-protection", f"the C library's start files of {cell.name}'s base image carry no "
                       f"{', '.join(sorted(expected))} property ({', '.join(unmarked)}): no program linked there is marked")
    for path in interpreter_binaries(runner):
        out = runner.run(["readelf", "-n", "-W", path], perf=False)
        assert out.exit_code == 0, f"readelf -n {path}: {out.stderr}"
        features = x86_features(out.stdout)
        record_property(f"x86_feature {path}", ", ".join(sorted(features or ())) or "none")
        assert features is not None and expected <= features, (
            f"{path}: x86 feature: {', '.join(sorted(features or ())) or 'none'}; expected {', '.join(sorted(expected))}")


def test_cf_protection_landing_pads_of_assembly_entries(cell, runner_for, record_property):
    """Built with -fcf-protection=full or =branch, every entry in hand-written assembly that the interpreter
    has (the trampoline; with frame records the loop's two entries in _PyEval_EvalFrameDefault) begins with
    endbr64, where an indirect call must land under IBT; the compiler adds it to C functions, nothing adds
    it to assembly."""
    if "IBT" not in _needs_cf_protection(cell):
        not_applicable("cflag:-fcf-protection=branch", f"{cell.name} is built without branch protection (CFLAGS: {cell.cflags})")
    runner = runner_for(cell, perf=False)
    frame_records = runner.run(["python3", "-c", FRAME_RECORDS_PROBE], perf=False)
    assert frame_records.exit_code == 0, frame_records.stderr
    records = frame_records.stdout.strip() == "True"
    wrong = []
    for path in interpreter_binaries(runner):
        code = {}
        for name in (TRAMPOLINE_START, EVAL_ENTRIES):
            out = runner.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={name}", path], perf=False)
            assert out.exit_code == 0, f"objdump {path}: {out.stderr}"
            body = out.stdout.split(f"<{name}>:\n", 1)
            code[name] = [" ".join(i.split()) for i in re.findall(r"^[ \t]*[0-9a-f]+:[ \t]+(.+)$", body[1].split("\n\n", 1)[0], re.M)] if len(body) == 2 else []
        record_property(f"assembly_entries {path}", json.dumps({n: c[:3] for n, c in code.items()}))
        print(f"{path}: {json.dumps({n: c[:3] for n, c in code.items()})}")
        assert code[TRAMPOLINE_START], f"{path}: no {TRAMPOLINE_START}"
        if code[TRAMPOLINE_START][0] != "endbr64":
            wrong.append(f"{path}: {TRAMPOLINE_START} begins with {code[TRAMPOLINE_START][0]}")
        if records:
            # each entry: [endbr64,] push %rbp; the loop's entries are its only frame set-ups
            loop = code[EVAL_ENTRIES]
            entries = [i for i, insn in enumerate(loop) if insn == "push %rbp"]
            assert len(entries) == 2, f"{path}: {EVAL_ENTRIES} of a build with frame records has {len(entries)} entries: {loop}"
            wrong += [f"{path}: the entry at instruction {i} of {EVAL_ENTRIES} follows {loop[i - 1] if i else 'nothing'}"
                      for i in entries if i == 0 or loop[i - 1] != "endbr64"]
    assert not wrong, f"assembly entries that do not begin with endbr64: {wrong}"


# --------------------------------------------------------------------------
# Frame pointers in the machine code, not only in the flags: PGO and LTO
# (the distro variant) recompile every function at link time, and a flag the
# link step does not carry would be lost there without sysconfig showing it.

FRAME_POINTER_PROBE = r"""
import json, os, re, subprocess, sys, sysconfig
files = [os.path.realpath(sys.executable)]
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    files.append(os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")))
# x86-64, aarch64, riscv64 (objdump writes addi s0,sp,N as add); ppc64le: the frame the kernel's walker
# follows is the back chain that stdu (stdux for large frames) stores, whatever r31 does
SETUP = re.compile(r"\bmov\s+%rsp,%rbp$|\bmov\s+x29,\s*sp$|\badd\s+x29,\s*sp,|\baddi?\s+s0,\s*sp,|"
                   r"\bstdux?\s+r1,")
FUNC = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
# (ppc64le's blr is its return; its indirect call, bctrl, has no operand)
CALL = re.compile(r"^\s*[0-9a-f]+:\s+((call|bl|blr|jal|jalr)\s|bctrl$)")
# calls that never return (a failed assert() of a --with-pydebug build, the stack protector's report): the
# compiler may lay them out before a shrink-wrapped frame setup that the path to them has already passed
NORETURN = re.compile(r"<(__assert_fail|__stack_chk_fail|abort)@plt>$")
# the C runtime's start files are not compiled with the build's flags
CRT = {"_start", "deregister_tm_clones", "register_tm_clones", "__do_global_dtors_aux", "frame_dummy",
       "_dl_relocate_static_pie", "_init", "_fini"}
result = {}
for path in files:
    counts = {"functions": 0, "with_frame_pointer": 0, "without": []}
    state = {"name": None, "section": "", "setup": False, "call": False}
    def finish():
        s = state
        if s["name"] is None or s["section"] != ".text" or ".cold" in s["name"] or s["name"] in CRT or not s["call"]:
            return
        counts["functions"] += 1
        if s["setup"]:
            counts["with_frame_pointer"] += 1
        else:
            counts["without"].append(s["name"])
    proc = subprocess.Popen(["objdump", "-d", "--no-show-raw-insn", path], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        line = line.rstrip()
        if line.startswith("Disassembly of section "):
            finish()
            state.update(name=None, section=line.split()[-1].rstrip(":"))
            continue
        m = FUNC.match(line)
        if m:
            finish()
            state.update(name=m.group(1), setup=False, call=False)
        elif state["name"] is not None and not state["call"]:
            if SETUP.search(line):
                state["setup"] = True
            elif CALL.match(line) and not NORETURN.search(line):
                state["call"] = True
    finish()
    if proc.wait() != 0:
        sys.exit(f"objdump -d {path} failed")
    result[path] = counts
result["frame_records"] = "-DPy_PERF_FRAME_RECORDS" in (sysconfig.get_config_var("CEVAL_FRAME_RECORDS_CFLAGS") or "")
print(json.dumps(result))
"""
# Frame records (3.13's patch 31, 3.11's patch 9): the eval loop keeps %rbp for the records it writes and
# is built without a frame pointer; its assembly entry, _PyEval_EvalFrameDefault, builds the frame record
# in its place
EVAL_LOOP_WITH_RECORDS = perf_runs.EVAL_LOOP_BODY



def frame_pointer_coverage(runner) -> dict:
    """{binary: {functions, with_frame_pointer, without}} over the interpreter (and libpython where shared),
    and frame_records: whether its eval loop is built for perf frame records;
    every function of .text that calls another (leaf functions keep no frame even with
    -mno-omit-leaf-frame-pointer when they need no stack; .cold parts have no entry), and whether it sets up
    its frame pointer before its first call (shrink-wrapped setups, after a fast path, count)."""
    result = runner.run(["python3", "-c", FRAME_POINTER_PROBE], perf=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_frame_pointers_in_the_machine_code(cell, runner_for, record_property):
    """With -fno-omit-frame-pointer, every non-leaf function of the interpreter sets up %rbp (x29) before it
    calls: frame-pointer unwinding (-X perf, perf record -g) passes through all of them.  Measured on the
    -O3 fp cells (all of 4128-5280 functions) and, as the control, on Debian trixie's python3.13 built
    without frame pointers (1 of 1251).  The assembly trampoline is held to it too: on the patched cells
    it builds a frame record; only a vanilla twin may show the released trampoline without one."""
    if "-fno-omit-frame-pointer" not in cell.cflags.split():
        not_applicable("cflag:-fno-omit-frame-pointer", f"{cell.name} is not built with -fno-omit-frame-pointer (CFLAGS: {cell.cflags or 'none'})")
    coverage = frame_pointer_coverage(runner_for(cell, perf=False))
    frame_records = coverage.pop("frame_records")
    for path, counts in coverage.items():
        record_property(f"frame_pointer_functions {path}", f"{counts['with_frame_pointer']}/{counts['functions']}")
        print(f"{path}: {counts['with_frame_pointer']} of {counts['functions']} non-leaf functions set up a "
              f"frame pointer")
    assert any(c["functions"] > 1000 for c in coverage.values()), f"too few functions disassembled: {coverage}"
    for path, counts in coverage.items():
        if cell.vanilla and TRAMPOLINE_START in counts["without"]:
            # the released trampoline of a native version may lack the frame record: 3.13.5's
            # "sub $8,%rsp; call *%rcx" (gh-136541, patches/3.13/0003; reproduced by
            # check_fix_perf_trampoline_unwind.py); every compiled function must still have one
            counts["without"].remove(TRAMPOLINE_START)
            record_property("trampoline_frame_record", "missing (as released)")
            print(f"{path}: {TRAMPOLINE_START} calls without a frame record, as released")
        if frame_records and EVAL_LOOP_WITH_RECORDS in counts["without"]:
            assert "_PyEval_EvalFrameDefault" not in counts["without"], (
                f"{path}: neither the eval loop nor its entry sets up a frame pointer")
            counts["without"].remove(EVAL_LOOP_WITH_RECORDS)
            record_property("eval_loop_frame_pointer", "frame records (its entry builds the frame record)")
            print(f"{path}: {EVAL_LOOP_WITH_RECORDS} keeps %rbp for frame records; its entry sets up the frame")
        assert not counts["without"], (
            f"{path}: {len(counts['without'])} of {counts['functions']} non-leaf functions call without "
            f"setting up a frame pointer, e.g. {counts['without'][:10]}")


# --------------------------------------------------------------------------
# The assembly trampoline (Python/asm_trampoline.S) under LTO: its symbols are
# in the binary, and what -X perf copies for each code object is its code.

TRAMPOLINE_PROBE = r"""
import json, os, subprocess, sys, sysconfig
files = [os.path.realpath(sys.executable)]
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    files.append(os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")))
out = {"symbols": {}}
for path in files:
    nm = subprocess.run(["nm", path], capture_output=True, text=True)
    for line in nm.stdout.splitlines():
        words = line.split()
        if len(words) == 3 and words[2] in ("_Py_trampoline_func_start", "_Py_trampoline_func_end"):
            out["symbols"][words[2]] = {"file": path, "value": int(words[0], 16), "type": words[1]}
start, end = (out["symbols"].get(n) for n in ("_Py_trampoline_func_start", "_Py_trampoline_func_end"))
if start and end and start["file"] == end["file"] and end["value"] > start["value"]:
    path = start["file"]
    with open(path, "rb") as f:
        pie = int.from_bytes(f.read(18)[16:18], "little") == 3      # ET_DYN: loaded at a base address
    base = 0
    if pie:
        for line in open("/proc/self/maps"):
            fields = line.split()
            if len(fields) >= 6 and fields[5] == path and int(fields[2], 16) == 0:
                base = int(fields[0].split("-")[0], 16)
                break
    with open("/proc/self/mem", "rb") as mem:
        mem.seek(base + start["value"])
        out["code"] = mem.read(end["value"] - start["value"]).hex()
    def trampoline_probe_function():
        return 1
    trampoline_probe_function()
    for line in open(f"/tmp/perf-{os.getpid()}.map"):
        addr, size, name = line.rstrip("\n").split(" ", 2)
        if name.startswith("py::trampoline_probe_function:"):
            with open("/proc/self/mem", "rb") as mem:
                mem.seek(int(addr, 16))
                out["copy"] = mem.read(int(size, 16)).hex()
print(json.dumps(out))
"""


def test_trampoline_code_survives_the_link(cell, runner_for, record_property):
    """_Py_trampoline_func_start/_end (Python/asm_trampoline.S) are text symbols of the interpreter with the
    code between them, and the trampoline -X perf writes into /tmp/perf-PID.map for a Python function is a
    byte-for-byte copy of that code: what LTO (the distro variant) does to the C around it leaves the
    assembly, and the bounds the C code copies it by, intact."""
    if not cell.backends:
        not_applicable("backends", f"{cell.name} offers no perf backend (no trampoline built)")
    result = runner_for(cell, perf=False).run(["python3", "-X", "perf", "-c", TRAMPOLINE_PROBE], perf=False)
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    symbols = found["symbols"]
    for name in ("_Py_trampoline_func_start", "_Py_trampoline_func_end"):
        assert name in symbols, f"{name} is not a symbol of the interpreter (nm): {symbols}"
        assert symbols[name]["type"] in "Tt", f"{name} is not in a text section: {symbols[name]}"
    size = symbols["_Py_trampoline_func_end"]["value"] - symbols["_Py_trampoline_func_start"]["value"]
    assert 0 < size <= 64, f"the trampoline between the symbols is {size} bytes"
    record_property("trampoline_code", found.get("code", ""))
    print(f"trampoline: {size} bytes, {found.get('code')}; copy for a Python function: {found.get('copy')}")
    assert found.get("copy"), "-X perf listed no trampoline for the probe function in /tmp/perf-PID.map"
    assert found["copy"] == found["code"], (
        f"the trampoline in /tmp/perf-PID.map ({found['copy']}) is not the code between the symbols ({found['code']})")


# --------------------------------------------------------------------------
# PGO and LTO really applied where the variant asks for them (distro)

OPTIMISATION_PROBE = r"""
import json, os, subprocess, sys, sysconfig
tree = sys.argv[1]
gcda = sum(name.endswith(".gcda") for _, _, names in os.walk(tree) for name in names)
nm = subprocess.run(["nm", os.path.realpath(sys.executable)], capture_output=True, text=True)
print(json.dumps({"cflags_nodist": sysconfig.get_config_var("PY_CFLAGS_NODIST") or "", "gcda": gcda,
                  "lto_priv": sum(".lto_priv." in line for line in nm.stdout.splitlines())}))
"""


def test_pgo_and_lto_applied(cell, runner_for, record_property):
    """--enable-optimizations: the training run left its profiles (*.gcda) in the built tree and the final
    build used them (-fprofile-use in sysconfig's PY_CFLAGS_NODIST, which the profile-opt build writes);
    --with-lto: compiled with -flto, and the link-time optimiser ran (it renames the static functions it
    privatises across units: *.lto_priv.N symbols, which no compiler run alone makes)."""
    options = cell.configure_args()
    pgo, lto = "--enable-optimizations" in options, any(o.startswith("--with-lto") for o in options)
    if not (pgo or lto):
        not_applicable("configure:--enable-optimizations,--with-lto", f"{cell.name} is configured without --enable-optimizations and --with-lto")
    result = runner_for(cell, perf=False).run(
        ["python3", "-c", OPTIMISATION_PROBE, f"/usr/src/{cell.recipe.srcdir}"], perf=False)
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    for key, value in found.items():
        record_property(key, value)
    print(found)
    flags = found["cflags_nodist"].split()
    if pgo:
        assert found["gcda"] > 0, f"no *.gcda profile in /usr/src/{cell.recipe.srcdir}: the training run made none"
        assert "-fprofile-use" in flags, f"the final build did not use the profile: PY_CFLAGS_NODIST {flags}"
    if lto:
        assert "-flto" in flags or any(f.startswith("-flto=") for f in flags), f"no -flto in PY_CFLAGS_NODIST {flags}"
        assert found["lto_priv"] > 0, "no *.lto_priv.* symbol in the interpreter: the link-time optimiser did not run"
