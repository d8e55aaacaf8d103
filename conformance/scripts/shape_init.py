"""Shape: a class instantiated in a hot loop, its __init__ doing the work.

From 3.12 the interpreter specializes `Obj(n)` for a Python class as
CALL_ALLOC_AND_ENTER_INIT and pushes __init__'s frame itself: under the perf
trampoline that frame must still be entered through it, or perf charges
__init__'s samples to make_many.
"""

import time

import shape_probe

EXPECTED = ["Obj.__init__", "make_many", "main"]


class Obj:
    def __init__(self, n):
        if shape_probe.PROBING:
            shape_probe.report()
        total = 0
        for i in range(n):
            total += i
        self.total = total


def make_many(deadline):
    made = 0
    while time.perf_counter() < deadline:
        Obj(2000)
        made += 1
    return made


def main():
    return make_many(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
