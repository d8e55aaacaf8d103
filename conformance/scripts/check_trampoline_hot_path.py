# requires: perf
# checks: behaviour
"""The trampoline's per-call entry points save no register on their common path.

Every Python call under the trampoline goes through its evaluator (from 3.13
also through _PyPerf_EvalPushedFrame, which the eval loop calls for a frame it
would have run inline).  Their common path tests the frame's code object, then
jumps to its trampoline: a tail call, with nothing kept on the stack.  Rare
work in them (reading the thread's stack bounds, refusing a frame when the C
stack is nearly full, publishing a new code object) belongs out of line;
inlined, its calls make the compiler save callee-saved registers in the
prologue, and then every call pays for them (six pushes and pops made -X perf
on a generator benchmark cost 1.569 times the instructions of a run without
it instead of 1.465).

The functions are disassembled with objdump from the interpreter's own symbol
table.  Must hold for each one found: from its first instruction to the first
indirect jump (the tail call into a trampoline), in address order, no
callee-saved register is pushed or stored and the stack pointer is not moved.
Where the interpreter is not built with the project's series (no
sys._stack_trampoline_backend), an evaluator that calls its trampoline
instead of jumping to it is CPython's own form: exit 2.  Exit 2 (cannot
check) without objdump, on an architecture other than x86-64,
aarch64 and riscv64, where the binary has neither function's symbol (stripped, or
no trampoline), and in a build that is not optimised or is instrumented (-O0,
-Og, --with-pydebug, a sanitizer): the compiler gives every function a frame
there, so the claim, about what users run, cannot be seen.
"""
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig

from childcheck import finish, sanitizer_build

CANNOT_CHECK = 2
SERIES = hasattr(sys, "_stack_trampoline_backend")   # the project's series, in every version it patches
FUNCTIONS = ("_PyPerf_EvalPushedFrame", "py_trampoline_evaluator")

X86_SAVE = re.compile(r"^\s*(push\s+%(rbx|rbp|r12|r13|r14|r15)\b|sub\s+\$0x[0-9a-f]+,%rsp|"
                      r"mov\s+%(rbx|rbp|r12|r13|r14|r15),-?(0x[0-9a-f]+)?\(%rsp\))")
X86_TAIL = re.compile(r"^\s*jmp\s+\*")
ARM_SAVE = re.compile(r"^\s*(stp\s+(x(19|2[0-9])|x29|x30),|str\s+(x(19|2[0-9])|x29|x30),|"
                      r"sub\s+sp,\s*sp,)")
ARM_TAIL = re.compile(r"^\s*br\s+x")
# riscv64: ra and s0-s11 stored, or sp lowered (objdump writes addi as add); the tail call is a jr other than
# the return (jr ra, which objdump writes ret)
RISCV_SAVE = re.compile(r"^\s*(c\.)?(sd\s+(ra|s[0-9]|s1[01]|fp),|(addi?|add)\s+sp,\s*sp,\s*-)")
RISCV_TAIL = re.compile(r"^\s*(c\.)?jr\s+(?!ra\b)[a-z]")


def binaries():
    """The interpreter's executable and, in a shared build, libpython."""
    found = [os.path.realpath(sys.executable)]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
        if os.path.exists(lib):
            found.append(os.path.realpath(lib))
    return found


def disassemble(binary, function):
    """Instructions of function in address order, as (address, text), or None where it has no symbol."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={function}", binary],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    lines = []
    inside = False
    for line in out.stdout.splitlines():
        if re.match(rf"^[0-9a-f]+ <{re.escape(function)}>:", line):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s*([0-9a-f]+):\s*(.*)$", line)
            if m:
                lines.append((int(m.group(1), 16), m.group(2).strip()))
            elif line.strip() == "" and lines:
                break
    return lines or None


def unoptimised_build():
    """Why the compiler's output is not what a release build runs (None for an optimised, plain build)."""
    if sanitizer_build():
        return "it is instrumented by a sanitizer"
    flags = " ".join(str(sysconfig.get_config_var(name) or "") for name in ("OPT", "CFLAGS", "PY_CFLAGS_NODIST"))
    if sysconfig.get_config_var("Py_DEBUG"):
        return "it is a debug build (--with-pydebug)"
    levels = re.findall(r"(?<!\S)-O([0-9sgz]?)(?!\S)", flags)
    if levels and levels[-1] in ("0", "g"):
        return f"it is compiled with -O{levels[-1]}"
    return None


def main():
    why = unoptimised_build()
    if why:
        print(f"cannot check: {why}; every function gets a frame there, so the common path's shape is not "
              "what an optimised build runs")
        return CANNOT_CHECK
    machine = platform.machine()
    if machine in ("x86_64", "amd64"):
        save, tail = X86_SAVE, X86_TAIL
    elif machine in ("aarch64", "arm64"):
        save, tail = ARM_SAVE, ARM_TAIL
    elif machine == "riscv64":
        save, tail = RISCV_SAVE, RISCV_TAIL
    elif machine == "ppc64le":
        # ELFv2: a call through a function pointer may return with another module's r2, so its caller restores
        # r2 after it, and GCC makes no sibling call through a pointer: both functions call their trampoline
        # from a frame of their own (stdu, LR and r2 saved) on every call.  The claim is not GCC's to keep here.
        print("cannot check: on ppc64le GCC makes no tail call through a function pointer (the caller restores "
              "r2, the TOC pointer, after it), so the evaluators call their trampolines from a frame of their own")
        return CANNOT_CHECK
    else:
        print(f"cannot check: the register-save patterns are written for x86-64, aarch64 and riscv64, not {machine}")
        return CANNOT_CHECK
    if shutil.which("objdump") is None:
        print("cannot check: no objdump (binutils) here")
        return CANNOT_CHECK
    problems = []
    checked = []
    for function in FUNCTIONS:
        code = None
        for binary in binaries():
            code = disassemble(binary, function)
            if code:
                break
        if not code:
            continue
        checked.append(function)
        path = []
        for address, text in code:
            if tail.match(text):
                break
            path.append((address, text))
        else:
            if not SERIES:
                print(f"cannot check: {function} calls its trampoline instead of jumping to it, as CPython "
                      "without the project's series does")
                return CANNOT_CHECK
            problems.append(f"{function}: no indirect jump (the tail call into a trampoline) in its "
                            f"{len(code)} instructions")
            continue
        saves = [f"{address:x}: {text}" for address, text in path if save.match(text)]
        if saves:
            problems.append(f"{function} saves registers or moves the stack pointer before its tail call "
                            f"({len(path)} instructions to it):\n    " + "\n    ".join(saves))
        else:
            print(f"{function}: {len(path)} instructions to the tail call, no register saved")
    if not checked:
        print(f"cannot check: none of {', '.join(FUNCTIONS)} in {', '.join(binaries())}'s symbols "
              "(stripped, or no trampoline)")
        return CANNOT_CHECK
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
