# checks: series
"""The interpreter's trampoline code compiles without warnings under a distribution's hardening flags.

Distributions build CPython with -O2 -D_FORTIFY_SOURCE=2 (Debian, Ubuntu, Fedora, RHEL), under which
glibc marks calls such as ftruncate() and write() warn_unused_result; a packager who applies the
series sees every new warning in the build log, and an upstream reviewer asks for it to go.  In the
interpreter's own build tree (sysconfig's abs_srcdir, kept in the cell images), each C file of
Python/, Modules/ and Objects/ that has trampoline code (it names _PyPerf_, PerfMap, perf_map or
perf_trampoline) is compiled again with the interpreter's core flags (PY_CORE_CFLAGS: -Wall
-Wextra and the rest, as the build used them) followed by -O2 -D_FORTIFY_SOURCE=2 -Wall.  Must
hold: no warning located in those files or in the headers of Include/.  CPython 3.13.5 as released compiles them without one.

A PGO build's profile flags (-fprofile-use and its kin) are left out: the profile belongs to the build's
own objects (its .gcda files are found by the object's name), so a compile to another output only warns
that it is missing (-Wmissing-profile), which says nothing of the source.

Exit 2 (cannot check) where the build tree or a compiler is not there (an installed package, a
stock image), and in a sanitizer build: under -fsanitize=address GCC's middle-end warnings
(-Wstringop-overflow) fire in CPython's own headers too, and no distribution builds so.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from childcheck import finish, sanitizer_build

CANNOT_CHECK = 2
DISTRIBUTION_FLAGS = ["-O2", "-D_FORTIFY_SOURCE=2", "-Wall"]
TRAMPOLINE_CODE = re.compile(r"_PyPerf_|PerfMap|perf_map|perf_trampoline")
PROFILE_FLAG = re.compile(r"^-fprofile-(use|correction|generate|update|dir|partial-training|instr-)")
WARNING = re.compile(r"^(?P<file>[^:\s]+\.[ch]):(?P<line>\d+):(?:\d+:)? warning: (?P<text>.*)$")


def trampoline_files(tree):
    """C files of the tree that have trampoline code, relative to it (bytecodes.c is the eval loop's
    DSL, compiled only through the generated cases that ceval.c includes)."""
    found = []
    for folder in ("Python", "Modules", "Objects"):
        for name in sorted(os.listdir(os.path.join(tree, folder))):
            if not name.endswith(".c") or name == "bytecodes.c":
                continue
            with open(os.path.join(tree, folder, name), errors="replace") as f:
                if TRAMPOLINE_CODE.search(f.read()):
                    found.append(f"{folder}/{name}")
    return found


def main():
    tree = sysconfig.get_config_var("abs_srcdir") or ""
    if not os.path.isfile(os.path.join(tree, "pyconfig.h")):
        print(f"cannot check: no configured build tree at {tree or '(abs_srcdir unset)'} (an installed interpreter)")
        return CANNOT_CHECK
    if sanitizer_build():
        print("cannot check: a sanitizer build (its instrumentation makes GCC warn in CPython's own headers)")
        return CANNOT_CHECK
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(compiler[0]) is None:
        print(f"cannot check: no compiler {compiler[0]} here")
        return CANNOT_CHECK
    core_flags = [flag for flag in shlex.split(sysconfig.get_config_var("PY_CORE_CFLAGS") or "")
                  if not PROFILE_FLAG.match(flag)]
    files = trampoline_files(tree)
    problems = []
    for path in files:
        done = subprocess.run([*compiler, *core_flags, *DISTRIBUTION_FLAGS, "-c", "-o", os.devnull, path],
                              cwd=tree, capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"{path} does not compile with {' '.join(DISTRIBUTION_FLAGS)}:\n{done.stderr[-2000:]}")
            continue
        warnings = [m for m in map(WARNING.match, done.stderr.splitlines())
                    if m and (m.group("file") in files or m.group("file").lstrip("./").startswith("Include/"))]
        for m in warnings:
            problems.append(f"{m.group('file')}:{m.group('line')}: warning: {m.group('text')}")
        print(f"{path}: {len(warnings)} warnings")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())
