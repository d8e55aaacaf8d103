"""Helper of the shape_*.py scripts: the interpreter's own view of the stack at the leaf.

`python3 /src/shape_NAME.py --probe` runs the shape until its leaf is reached,
then prints one JSON line and exits at once:

  stack     the Python frames from the leaf to the root, leaf first, as the
            perf map names them: py::<co_qualname>:<co_filename>
  expected  the script's own EXPECTED list (its frames, leaf first, without <module>)
  stdlib    sysconfig's stdlib directory (to tell asyncio's frames from the script's)

The conformance test demands that perf's samples show exactly `stack`, so the
expectation comes from the interpreter, not from a list written by hand; the
script's EXPECTED is only checked against it.
"""

import json
import os
import sys
import sysconfig

PROBING = "--probe" in sys.argv


def seconds_since_start():
    """Wall-clock seconds since this process started (Linux /proc; 0 where it cannot be read)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")   # field 22, starttime, in clock ticks
        with open("/proc/uptime") as fh:
            return max(0.0, float(fh.read().split()[0]) - started)
    except (OSError, ValueError, IndexError):
        return 0.0


# Seconds of leaf work in a profiled run: at least 0.4, and three times what start-up and the imports took, so
# that the leaf's work dominates the samples however slow the build (--with-pydebug, -O0, ASan) or the host.
DURATION = max(0.4, 3 * seconds_since_start())


def symbol(code):
    return "py::%s:%s" % (getattr(code, "co_qualname", code.co_name), code.co_filename)


def frame_code_sample():
    return report.__code__


def report():
    """Print the caller's stack (leaf first) and end the process."""
    frame = sys._getframe(1)
    stack = []
    while frame is not None:
        stack.append(symbol(frame.f_code))
        frame = frame.f_back
    main = sys.modules["__main__"]
    print(json.dumps({
        "stack": stack,
        "expected": list(getattr(main, "EXPECTED", [])),
        "stdlib": sysconfig.get_paths()["stdlib"],
        "recursionlimit": sys.getrecursionlimit(),
        "depth": getattr(main, "DEPTH", None),   # shape_recursion's nested rec frames
        # before 3.11 code objects have no co_qualname: the map names them by co_name
        "qualnames": hasattr(frame_code_sample(), "co_qualname"),
    }))
    sys.stdout.flush()
    os._exit(0)
