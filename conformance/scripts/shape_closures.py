"""Shape: a closure called through a lambda defined beside it, from a module-level lambda.

Qualnames: outer.<locals>.inner <- outer.<locals>.<lambda> <- outer <- <lambda> <- <module>.
"""

import time

import shape_probe

EXPECTED = ["outer.<locals>.inner", "outer.<locals>.<lambda>", "outer", "<lambda>"]


def outer(duration):
    deadline = time.perf_counter() + duration

    def inner(step):
        if shape_probe.PROBING:
            shape_probe.report()
        total = 0
        while time.perf_counter() < deadline:
            for i in range(2000):
                total += i * step
        return total

    call = lambda step: inner(step)  # noqa: E731
    return call(3)


start = lambda: outer(shape_probe.DURATION)  # noqa: E731

if __name__ == "__main__":
    start()
