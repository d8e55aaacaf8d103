# The three workloads instructions.sh counts: a yield-from chain three generators deep, small function
# calls, and a float loop without calls.  python workloads.py generators|calls|loop
import sys
kind = sys.argv[1]
if kind == "generators":
    def leaf(n):
        for i in range(n):
            yield i
    def mid(n):
        yield from leaf(n)
    def top(n):
        yield from mid(n)
    s = 0
    for _ in range(20):
        for v in top(2000):
            s += v
elif kind == "calls":
    def f(a, b):
        return a + b
    def g(a):
        return f(a, 1) + f(a, 2)
    s = 0
    for i in range(40000):
        s += g(i)
elif kind == "loop":
    s = 0.0
    xs = [float(i) for i in range(100)]
    for _ in range(400):
        for x in xs:
            s += x * 1.5 - x / 3.0
print(kind, s)
