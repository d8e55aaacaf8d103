"""Shape: coroutines awaiting each other, run by asyncio.run.

The leaf yields to the event loop between chunks of work, so every chunk runs
in a new step of the task: event loop -> task step (C) -> main -> middle -> leaf.
Between main and <module> lie the frames of asyncio's event loop (asyncio.run,
Runner.run, run_until_complete, run_forever, _run_once, Handle._run); the
probe reports them as the interpreter sees them.
"""

import asyncio
import time

import shape_probe

EXPECTED = ["leaf", "middle", "main"]


async def leaf(deadline):
    total = 0
    chunks = 0
    while time.perf_counter() < deadline:
        for i in range(2000):
            total += i
        chunks += 1
        if chunks % 50 == 0:
            await asyncio.sleep(0)
            if shape_probe.PROBING:
                shape_probe.report()   # after a resumption by the event loop
    return total


async def middle(deadline):
    return await leaf(deadline)


async def main():
    return await middle(time.perf_counter() + shape_probe.DURATION)


if __name__ == "__main__":
    asyncio.run(main())
