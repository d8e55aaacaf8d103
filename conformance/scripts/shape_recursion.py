"""Shape: recursion close to the recursion limit (limit - 50 nested rec frames), work at the bottom."""

import sys
import time

import shape_probe

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
    return rec(sys.getrecursionlimit() - 50, time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
