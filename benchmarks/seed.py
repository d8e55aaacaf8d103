"""The howto's seed script, with a longer loop: what the attribution-fidelity runs sample.

The same functions as conformance/scripts/script.py (foo's loop under bar under baz under
<module>); N (default 5,000,000) makes the run long enough for a few thousand samples.
"""

import sys


def foo(n):
    result = 0
    for _ in range(n):
        result += 1
    return result


def bar(n):
    foo(n)


def baz(n):
    bar(n)


if __name__ == "__main__":
    baz(int(sys.argv[1]) if len(sys.argv) > 1 else 5000000)
