"""Run workloads.py under a profile hook that collects every code object executed; print them as JSON.

  python3 -X perf count_codes.py [workloads.py arguments]

The hook (sys.setprofile) sees each Python frame's code object when it starts;
the objects are kept alive, so that no id is reused.  The last line of output is
{"pid": ..., "codes": [[qualified name, filename, first line], ...]} for the code
objects of workloads.py -- what the perf map or jitdump of the same process must
describe, once each.
"""

import json
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads.py")
seen = {}


def hook(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if id(code) not in seen:
            seen[id(code)] = code


def main():
    sys.argv = [WORKLOADS] + sys.argv[1:]
    sys.setprofile(hook)
    try:
        runpy.run_path(WORKLOADS, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    finally:
        sys.setprofile(None)
    codes = [[getattr(c, "co_qualname", c.co_name), c.co_filename, c.co_firstlineno]
             for c in seen.values() if c.co_filename == WORKLOADS]
    print(json.dumps({"pid": os.getpid(), "codes": codes}))


if __name__ == "__main__":
    main()
