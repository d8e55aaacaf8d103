# requires: perf
# checks: behaviour
"""The perf map C API, called as a JIT or an extension would (through ctypes).

PyUnstable_PerfMapState_Init(), PyUnstable_WritePerfMapEntry(),
PyUnstable_PerfMapState_Fini() and PyUnstable_PerfTrampoline_CompileCode()
must be exported by the interpreter with upstream's names and signatures:
  * Init returns 0 and creates /tmp/perf-PID.map (mode 0600);
  * an entry written through the API lands in the same file as the
    trampoline's own entries (-X perf), formatted "<hex addr> <hex size> <name>";
  * after Fini, writing again re-opens the map and appends (nothing lost);
  * CompileCode on a code object that has not run yet publishes its
    trampoline at once (and the later call adds no second entry).
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import ctypes, json, os, sys
api = ctypes.pythonapi
api.PyUnstable_PerfMapState_Init.restype = ctypes.c_int
api.PyUnstable_WritePerfMapEntry.restype = ctypes.c_int
api.PyUnstable_WritePerfMapEntry.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p]
api.PyUnstable_PerfMapState_Fini.restype = None
api.PyUnstable_PerfTrampoline_CompileCode.restype = ctypes.c_int
api.PyUnstable_PerfTrampoline_CompileCode.argtypes = [ctypes.py_object]

def python_function():
    return 1
python_function()
out = {"init": api.PyUnstable_PerfMapState_Init()}
path = "/tmp/perf-%d.map" % os.getpid()
out["mode"] = oct(os.stat(path).st_mode & 0o777) if os.path.exists(path) else None
out["write1"] = api.PyUnstable_WritePerfMapEntry(0x7f0000001000, 0x40, b"my_jit::first")
api.PyUnstable_PerfMapState_Fini()
out["write2"] = api.PyUnstable_WritePerfMapEntry(0x7f0000002000, 0x80, b"my_jit::after_fini")

def compiled_before_running():
    return 2
out["compile"] = api.PyUnstable_PerfTrampoline_CompileCode(compiled_before_running.__code__)
out["map_after_compile"] = open(path).read()
compiled_before_running()
out["pid"] = os.getpid()
print(json.dumps(out))
'''


def main():
    proc = subprocess.run([sys.executable, "-X", "perf", "-c", CHILD],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        print(f"FAIL: child exited {proc.returncode}: {proc.stderr[-2000:]}")
        return 1
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    path = f"/tmp/perf-{res['pid']}.map"
    text = open(path).read()
    os.unlink(path)
    lines = text.splitlines()
    problems = []
    if res["init"] != 0:
        problems.append(f"PyUnstable_PerfMapState_Init returned {res['init']}")
    if res["mode"] != "0o600":
        problems.append(f"map mode {res['mode']}, expected 0o600")
    if (res["write1"], res["write2"]) != (0, 0):
        problems.append(f"PyUnstable_WritePerfMapEntry returned {res['write1']}, {res['write2']}")
    for want in ("7f0000001000 40 my_jit::first", "7f0000002000 80 my_jit::after_fini"):
        if want not in lines:
            problems.append(f"{want!r} is not a line of the map")
    if not any(l.endswith(" py::python_function:<string>") for l in lines):
        problems.append("the trampoline's own entry for python_function is missing from the same map")
    if " py::compiled_before_running:<string>" not in res["map_after_compile"]:
        problems.append("PyUnstable_PerfTrampoline_CompileCode did not publish the code object's trampoline")
    if text.count(" py::compiled_before_running:<string>\n") != 1:
        problems.append("compiled_before_running is mapped "
                        f"{text.count(' py::compiled_before_running:<string>')} times, expected once")
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems))
        return 1
    print(f"OK: C API entries and trampoline entries share /tmp/perf-PID.map ({len(lines)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
