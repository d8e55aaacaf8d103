"""Shape: recursion close to the recursion limit (limit - 50 nested rec frames), work at the bottom.

Where the C recursion budget ends the recursion first under a trampoline (a debug build of 3.12+), as deep
as that budget allows instead: DEPTH nested rec frames.
"""

import sys
import time

import shape_probe
from childcheck import recursion_depth_under_trampoline

DEPTH = recursion_depth_under_trampoline(sys.getrecursionlimit() - 50)

EXPECTED = ["rec"]  # ... repeated; then main


def rec(n, deadline):
    if n > 0:
        return rec(n - 1, deadline)
    if shape_probe.PROBING:
        shape_probe.report()
    total = 0
    while time.perf_counter() < deadline:
        for i in range(2000):
            total += i
    return total


def main():
    return rec(DEPTH, time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
