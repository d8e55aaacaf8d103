"""Shape: C re-entering Python: sum() (C) pulls from map() (C), which calls a Python function."""

import time

import shape_probe

EXPECTED = ["square", "map_driver", "main"]


def square(x):
    if shape_probe.PROBING:
        shape_probe.report()
    total = 0
    for i in range(200):
        total += i * x
    return total


def map_driver(deadline):
    data = range(500)
    total = 0
    while time.perf_counter() < deadline:
        total += sum(map(square, data))
    return total


def main():
    return map_driver(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
