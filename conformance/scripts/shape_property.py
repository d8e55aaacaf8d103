"""Shape: a Python property read in a hot loop, its getter doing the work.

`obj.value` for a property is specialized (3.12+) as LOAD_ATTR_PROPERTY,
which pushes the getter's frame itself; under the perf trampoline that frame
must still be entered through it.
"""

import time

import shape_probe

EXPECTED = ["Box.value", "read_many", "main"]


class Box:
    @property
    def value(self):
        if shape_probe.PROBING:
            shape_probe.report()
        total = 0
        for i in range(2000):
            total += i
        return total


def read_many(deadline):
    box = Box()
    total = 0
    while time.perf_counter() < deadline:
        total += box.value
    return total


def main():
    return read_many(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
