"""Microbenchmarks for the per-frame cost of the perf trampoline.

usage: python3 micro.py KIND N D
  gen   N items pulled through a chain of D+1 `yield from` generators over a leaf generator:
        D+2 generator frames resumed per item
  tree  pyperformance-style tree walk (recursive yield from), complete binary tree of depth D, walked N times
  coro  N runs of a chain of D awaits (async def c(d): return await c(d-1)), no suspension:
        D coroutine frames entered per run (the outermost is sent from C in both cases)
  call  N calls of a one-line Python function (CALL_PY_EXACT_ARGS), D ignored
  meth  N method calls on a small object, `v.get()` (LOAD_METHOD, CALL_PY_EXACT_ARGS; deltablue's shape), D ignored
  init  N instantiations of a class with a Python __init__, `Var(i)` (entered from C: type_call,
        slot_tp_init; in 3.11 a C entry with or without the trampoline), D ignored
"""
import sys

def leaf(n):
    for i in range(n):
        yield i

def chain(d, n):
    if d == 0:
        yield from leaf(n)
    else:
        yield from chain(d - 1, n)

def run_gen(n, d):
    for _ in chain(d, n):
        pass

class Tree:
    __slots__ = ("left", "value", "right")
    def __init__(self, left, value, right):
        self.left, self.value, self.right = left, value, right
    def __iter__(self):
        if self.left:
            yield from self.left
        yield self.value
        if self.right:
            yield from self.right

def tree(d, start=0):
    if d == 0:
        return None
    mid = start + (1 << (d - 1)) - 1
    return Tree(tree(d - 1, start), mid, tree(d - 1, mid + 1))

def run_tree(n, d):
    t = tree(d)
    for _ in range(n):
        for _ in t:
            pass

async def c(d):
    if d == 0:
        return 1
    return await c(d - 1)

def run_coro(n, d):
    for _ in range(n):
        co = c(d)
        try:
            co.send(None)
        except StopIteration:
            pass

def f(x):
    return x

def run_call(n, d):
    for i in range(n):
        f(i)

class Var:
    def __init__(self, value):
        self.value = value
    def get(self):
        return self.value

def run_meth(n, d):
    v = Var(1)
    for i in range(n):
        v.get()

def run_init(n, d):
    for i in range(n):
        Var(i)

kind, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# warm up (specialization, trampolines compiled) at any N
RUN = {"gen": run_gen, "tree": run_tree, "coro": run_coro, "call": run_call, "meth": run_meth, "init": run_init}
RUN[kind](50, d)
RUN[kind](n, d)
