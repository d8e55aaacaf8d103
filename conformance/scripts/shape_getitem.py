"""Shape: a Python __getitem__ called by subscription in a hot loop, doing the work.

`seq[i]` on a class with a Python __getitem__ is specialized (3.11+) as
BINARY_SUBSCR_GETITEM, which pushes __getitem__'s frame itself; under the perf
trampoline that frame must still be entered through it.
"""

import time

import shape_probe

EXPECTED = ["Seq.__getitem__", "read_many", "main"]


class Seq:
    def __getitem__(self, n):
        if shape_probe.PROBING:
            shape_probe.report()
        total = 0
        for i in range(n):
            total += i
        return total


def read_many(deadline):
    seq = Seq()
    total = 0
    while time.perf_counter() < deadline:
        total += seq[2000]
    return total


def main():
    return read_many(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
