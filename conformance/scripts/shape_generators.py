"""Shape: a generator doing the work between its yields, consumed by a for loop."""

import time

import shape_probe

EXPECTED = ["produce", "consume", "main"]


def produce(deadline):
    while time.perf_counter() < deadline:
        total = 0
        for i in range(2000):
            total += i
        if shape_probe.PROBING:
            shape_probe.report()   # after a resumption: the frame the for loop resumed
        yield total


def consume(deadline):
    count = 0
    for value in produce(deadline):
        count += value & 1
    return count


def main():
    return consume(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
