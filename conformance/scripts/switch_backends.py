"""A run that leaves perf_jit and comes back (conformance/test_backend_switch_recording.py).

Under perf_jit (-X perf_jit, or activated here) busy_first() spins for
--seconds; the backend is switched to perf for middle(), then back to
perf_jit for busy_third(), which spins as long.  Each period's start and end
(CLOCK_MONOTONIC, the clock of `perf record -k 1`) is printed as a line
"period <name> <start> <end>" so that samples can be placed in their period.
"""
import sys
import time


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def busy_first(seconds):
    end = now() + seconds
    n = 0
    while now() < end:
        for i in range(2000):
            n += i * i
    return n


def middle(seconds):
    end = now() + seconds
    n = 0
    while now() < end:
        for i in range(2000):
            n += i
    return n


def busy_third(seconds):
    end = now() + seconds
    n = 0
    while now() < end:
        for i in range(2000):
            n += i * i
    return n


def period(name, function, seconds):
    start = now()
    function(seconds)
    print(f"period {name} {start:.6f} {now():.6f}", flush=True)


def main():
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1.0
    if not sys.is_stack_trampoline_active():
        sys.activate_stack_trampoline("perf_jit")
    period("busy_first", busy_first, seconds)
    sys.activate_stack_trampoline("perf")
    period("middle", middle, seconds / 5)
    sys.activate_stack_trampoline("perf_jit")
    period("busy_third", busy_third, seconds)
    print("active", sys.is_stack_trampoline_active(), flush=True)


if __name__ == "__main__":
    main()
