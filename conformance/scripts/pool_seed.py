"""The howto's chain (script.py's foo, bar, baz) run in a pool worker, for a recording of the parent.

    python3 -X perf pool_seed.py START_METHOD [SECONDS]

A ProcessPoolExecutor with one worker of START_METHOD (spawn, forkserver, fork) runs
script.baz over and over for SECONDS (default 1.5) under py::work; the parent waits, then prints
`parent PID worker PID`.  Stdlib only: it runs in the cell images.
"""

import concurrent.futures
import multiprocessing
import os
import sys
import time

import script


def work(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        script.baz(20000)
    return os.getpid()


if __name__ == "__main__":
    method = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        worker = pool.submit(work, seconds).result()
    print("parent", os.getpid(), "worker", worker, flush=True)
