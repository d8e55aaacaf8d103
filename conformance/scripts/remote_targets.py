"""Targets that run without the trampoline until it is switched on from outside (test_remote_activation).

  python3 remote_targets.py busy       one thread, always in Python code: baz under bar under foo
  python3 remote_targets.py sleeping   idle in select() most of the time, a short burst of the chain between
  python3 remote_targets.py threads    the main thread waits in join() for ever; one thread runs the chain,
                                       another holds the GIL in long C calls (sorting)

Each prints "ready" once it runs, then "active" when sys.is_stack_trampoline_active() turns true (checked
between bursts), so that the test sees the interpreter's own answer too.
"""
import select
import sys
import threading
import time


def baz(n):
    total = 0
    for i in range(n):
        total += i
    return total


def bar(n):
    return baz(n)


def foo(n):
    return bar(n)


def report_when_active():
    said = False
    while True:
        active = sys.is_stack_trampoline_active()
        if active != said:
            print("active" if active else "inactive", flush=True)
            said = active
        yield


def busy():
    watch = report_when_active()
    while True:
        next(watch)
        foo(200_000)


def sleeping():
    watch = report_when_active()
    while True:
        next(watch)
        select.select([], [], [], 0.3)
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            foo(20_000)


def threads():
    def worker():
        watch = report_when_active()
        while True:
            next(watch)
            foo(200_000)

    def hog():
        data = list(range(3_000_000, 0, -1))
        while True:
            sorted(data)           # a C call that holds the GIL
            time.sleep(0.01)

    started = [threading.Thread(target=worker, daemon=True), threading.Thread(target=hog, daemon=True)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()              # the main thread waits in a lock, for ever


if __name__ == "__main__":
    print("ready", flush=True)
    {"busy": busy, "sleeping": sleeping, "threads": threads}[sys.argv[1]]()
