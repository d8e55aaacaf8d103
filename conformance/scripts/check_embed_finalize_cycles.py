# requires: perf
# checks: behaviour
"""An embedding application that initialises and finalises the interpreter 100 times keeps its memory flat.

Built with the image's cc against the interpreter's own headers and library
(python3-config --embed): each cycle runs Py_Initialize(), a few imports and
a function call, and Py_FinalizeEx().  With PYTHONPERFSUPPORT=1 every cycle
starts the trampoline, which gives each code object it runs an entry.  The
bytes malloc() holds (mallinfo2) are read after cycle 10 and after cycle 100,
with and without PYTHONPERFSUPPORT=1: the trampoline may not add more than
2 KiB per cycle to what the interpreter itself keeps.  (3.11's deep-frozen
code objects are static: their co_extra array used to be freed at
finalization without calling the free functions of its slots, so every
entry of a deep-frozen code object that ran leaked at each Py_FinalizeEx.)
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

CANNOT_CHECK = 2
CYCLES = 100
ALLOWED_PER_CYCLE = 2048

EMBED = r'''
#include <Python.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int cycles = atoi(argv[1]);
    size_t after_10 = 0;
    for (int i = 0; i < cycles; i++) {
        Py_Initialize();
        if (PyRun_SimpleString("import os, json, collections, importlib.util\n"
                               "def work(n):\n    return os.path.join('a', str(n))\n"
                               "work(1)\n") != 0) {
            return 3;
        }
        if (Py_FinalizeEx() != 0) {
            return 4;
        }
        if (i == 9) {
            after_10 = mallinfo2().uordblks;
        }
    }
    printf("%zu %zu\n", after_10, (size_t)mallinfo2().uordblks);
    return 0;
}
'''


def main():
    cc = shutil.which("cc") or shutil.which("gcc")
    config = os.path.join(os.path.dirname(sys.executable), f"python{sysconfig.get_config_var('VERSION')}-config")
    if cc is None or not os.path.exists(config):
        print(f"cannot check: needs cc and {config}")
        return CANNOT_CHECK
    workdir = tempfile.mkdtemp()
    try:
        src, exe = os.path.join(workdir, "embed.c"), os.path.join(workdir, "embed")
        with open(src, "w") as fh:
            fh.write(EMBED)
        flags = subprocess.run([config, "--cflags"], capture_output=True, text=True).stdout.split()
        libs = subprocess.run([config, "--embed", "--ldflags"], capture_output=True, text=True).stdout.split()
        build = subprocess.run([cc, "-o", exe, src, *flags, *libs], capture_output=True, text=True, timeout=300)
        if build.returncode != 0:
            print(f"cannot check: the embedding program does not build: {build.stderr[-600:]}")
            return CANNOT_CHECK
        growth = {}
        for label, extra in (("without", {}), ("with PYTHONPERFSUPPORT=1", {"PYTHONPERFSUPPORT": "1"})):
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            env.update(extra, PYTHONHOME=sys.prefix, TMPDIR=workdir)
            run = subprocess.run([exe, str(CYCLES)], capture_output=True, text=True, env=env, timeout=600,
                                 cwd=workdir)
            if run.returncode != 0:
                print(f"the embedding program failed {label} ({run.returncode}): {run.stderr[-600:]}")
                return 1
            after_10, after_all = map(int, run.stdout.split())
            growth[label] = (after_all - after_10) / (CYCLES - 10)
            print(f"{label}: {growth[label]:.0f} bytes more held by malloc per cycle (cycles 11-{CYCLES})")
        for name in os.listdir("/tmp"):
            if name.startswith("perf-") and name.endswith(".map"):
                pid = name[5:-4]
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    os.unlink(os.path.join("/tmp", name))
        extra = growth["with PYTHONPERFSUPPORT=1"] - growth["without"]
        print(f"the trampoline's share: {extra:.0f} bytes per cycle (allowed: {ALLOWED_PER_CYCLE})")
        if extra > ALLOWED_PER_CYCLE:
            print(f"the trampoline leaks about {extra:.0f} bytes at each Py_Initialize/Py_FinalizeEx cycle")
            return 1
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
