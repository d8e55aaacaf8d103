"""Shape: an exception raised in thrower, propagating through middle, caught in catcher's hot loop."""

import time

import shape_probe

EXPECTED = ["thrower", "middle", "catcher", "main"]


class Fail(Exception):
    pass


def thrower(k):
    if shape_probe.PROBING:
        shape_probe.report()
    total = 0
    for i in range(300):
        total += i * k
    raise Fail(total)


def middle(k):
    return thrower(k) + 1   # never returns: the exception passes through this frame


def catcher(deadline):
    caught = 0
    while time.perf_counter() < deadline:
        for k in range(20):
            try:
                middle(k)
            except Fail:
                caught += 1
    return caught


def main():
    return catcher(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
