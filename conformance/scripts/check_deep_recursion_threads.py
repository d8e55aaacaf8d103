# requires: perf
# hits: patches/3.13/0028 /a thread with a \d+ KiB stack: \d+ levels complete without -X perf; with -X perf the process ended with killed by SIGSEGV/
# checks: behaviour
"""Deep recursion under -X perf in a thread with a small stack ends in RecursionError or completes, never in a crash.

check_deep_recursion.py's check (see there) in threads started after
threading.stack_size(): 512 KiB and 128 KiB.  A thread's stack is its own,
of the size it was created with, however large the main thread's is: what
the interpreter without -X perf completes there (from 3.11 a plain recursion
takes no C stack at all) must not crash with it.  Under -X perf even the thread's own start (threading's
Python frames) may meet RecursionError in a stack that small: that counts as
a RecursionError too.  (Smaller stacks are left out: in a -O0 build, where a
frame of the eval loop takes about 10 KiB, a thread of 64 KiB cannot run
threading's own start under -X perf, which then leaves Thread.start()
waiting for ever.)
"""
import sys

import check_deep_recursion

THREAD_CASES = [("call", 512 * 1024), ("gen", 512 * 1024), ("call", 128 * 1024)]

if __name__ == "__main__":
    sys.exit(check_deep_recursion.main(THREAD_CASES))
