"""Shape: C re-entering Python: sorted() (C) calls the key function for every item."""

import time

import shape_probe

EXPECTED = ["keyfn", "sort_driver", "main"]


def keyfn(x):
    if shape_probe.PROBING:
        shape_probe.report()
    total = 0
    for i in range(200):
        total += i ^ x
    return total


def sort_driver(deadline):
    data = list(range(500, 0, -1))
    rounds = 0
    while time.perf_counter() < deadline:
        sorted(data, key=keyfn)
        rounds += 1
    return rounds


def main():
    return sort_driver(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
