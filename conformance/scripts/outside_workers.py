"""The seed chain in a process and in short-lived workers, for recordings made from outside the container.

    python3 -X perf outside_workers.py GATE SECONDS WORKERS [START_METHOD]

Waits until the file GATE exists (the recording has started), runs the howto's chain
(py::foo under py::bar under py::baz under py::<module>) for SECONDS, then starts WORKERS processes one
after the other (multiprocessing, START_METHOD, default fork), each running the chain under py::work for
SECONDS and exiting; prints its own pid first, then each worker's.  Stdlib only: it runs in the cell images.
"""

import multiprocessing
import os
import sys
import time


def foo(n):
    result = 0
    for _ in range(n):
        result += 1
    return result


def bar(n):
    foo(n)


def baz(n):
    bar(n)


def work(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        baz(20000)
    return os.getpid()


if __name__ == "__main__":
    gate, seconds, workers = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    method = sys.argv[4] if len(sys.argv) > 4 else "fork"
    print("main", os.getpid(), flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.05)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        baz(20000)
    context = multiprocessing.get_context(method)
    for _ in range(workers):
        with context.Pool(1) as pool:
            print("worker", pool.apply(work, (seconds,)), flush=True)
