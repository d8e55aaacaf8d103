"""Shape: a method called from another method (perf names it by qualname: Klass.method)."""

import time

import shape_probe

EXPECTED = ["Klass.method", "Klass.run", "main"]


class Klass:
    def method(self, deadline):
        if shape_probe.PROBING:
            shape_probe.report()
        total = 0
        while time.perf_counter() < deadline:
            for i in range(2000):
                total += i
        return total

    def run(self, deadline):
        return self.method(deadline)


def main():
    return Klass().run(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    main()
