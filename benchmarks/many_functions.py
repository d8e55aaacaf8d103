#!/usr/bin/env python3
"""A program with many Python functions on the stack: what perf_jit's post-processing costs per code object.

  python3 -X perf_jit many_functions.py N [--depth D] [--seconds S] [--free K]

Makes N functions, each from its own source through compile() + exec() (so the process also runs, and
frees, N module code objects: with the 3.13 series their trampoline slots are reused), chained D deep:
f_<k*D+j> calls f_<k*D+j+1>, the last of a chain calls spin(), a small loop.  Every chain is called
once, then the chains are called round-robin until S seconds of calling have passed, so a recording at
-F 999 gets about 1000*S samples, nearly all with D+1 `py::` frames (f_... and spin) above
`py::call_chains` and `py::<module>`.

--free K: after the first pass, drop the first K chains' functions and make K new chains (names
g_<i>); with the series their code objects' slots are reused, so the dump has later code loads at the
addresses of earlier ones, and samples before and after must be named differently.

Prints one JSON line: {"pid", "functions", "chains", "calls", "seconds"}.
"""

import argparse
import json
import os
import sys
import time

FILE = "<many_functions>"


def make_chain(prefix, first, depth, spin, namespace):
    """Functions prefix<first> .. prefix<first+depth-1>, each calling the next, the last calling spin."""
    chain = []
    for j in reversed(range(depth)):
        name = "%s%d" % (prefix, first + j)
        callee = chain[0] if chain else spin
        source = "def %s(n, callee=callee):\n    return callee(n) + 1\n" % name
        ns = {"callee": callee}
        exec(compile(source, FILE, "exec"), ns)
        chain.insert(0, ns[name])
    namespace.extend(chain)
    return chain[0]


def spin(n):
    total = 0
    for i in range(n):
        total += i
    return total


def call_chains(heads, seconds, work):
    calls = 0
    for head in heads:   # every function runs at least once
        head(work)
        calls += 1
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for head in heads:
            head(work)
            calls += 1
            if calls % 64 == 0 and time.perf_counter() >= end:
                break
    return calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("functions", type=int)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--work", type=int, default=200, help="loop iterations of spin() per chain call")
    parser.add_argument("--free", type=int, default=0)
    args = parser.parse_args(argv)
    depth = max(1, min(args.depth, args.functions))
    functions = []
    heads = [make_chain("f_", k * depth, depth, spin, functions) for k in range(args.functions // depth)]
    start = time.perf_counter()
    calls = call_chains(heads, args.seconds / (2 if args.free else 1), args.work)
    if args.free:
        del heads[:args.free]
        functions.clear()
        heads = [make_chain("g_", k * depth, depth, spin, functions) for k in range(args.free)] + heads
        calls += call_chains(heads, args.seconds / 2, args.work)
    print(json.dumps({"pid": os.getpid(), "functions": len(heads) * depth, "chains": len(heads), "calls": calls,
                      "seconds": round(time.perf_counter() - start, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
