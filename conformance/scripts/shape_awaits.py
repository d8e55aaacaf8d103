"""Shape: a coroutine awaiting another, which returns without suspending, many times.

`await leaf()` on a coroutine is SEND, specialized (3.12+) as SEND_GEN, which
pushes the awaited coroutine's frame itself; a plain return ends it.  Under
the perf trampoline each awaited frame must still be entered through it.  The
coroutine is driven by hand (send(None)), so no event loop sits in the stack.
"""

import time

import shape_probe

EXPECTED = ["leaf", "middle", "main"]


async def leaf():
    if shape_probe.PROBING:
        shape_probe.report()
    total = 0
    for i in range(2000):
        total += i
    return total


async def middle(deadline):
    total = 0
    while time.perf_counter() < deadline:
        total += await leaf()
    return total


def main():
    coroutine = middle(time.perf_counter() + shape_probe.DURATION)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value


if __name__ == "__main__":
    main()
