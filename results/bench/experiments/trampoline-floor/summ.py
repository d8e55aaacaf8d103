"""summ.py MATRIX_OUTPUT...: instructions per unit (items x frames) for each kind and mode, from matrix.sh lines."""
import sys
units = {"gen": lambda d: d + 2, "tree": lambda d: 1, "coro": lambda d: d, "call": lambda d: 1,
         "meth": lambda d: 1, "init": lambda d: 1}
name = {"gen": "generator resumption (yield from chain)", "tree": "tree walk (1023 nodes), per walk",
        "coro": "await of a coroutine (creation + send)", "call": "Python-to-Python call",
        "meth": "method call v.get()", "init": "instantiation Var(i) (Python __init__ from C)"}
rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        tag, kind, mode, d, n1, i1, n2, i2 = line.split()
        per = (int(i2) - int(i1)) / ((int(n2) - int(n1)) * units[kind](int(d)))
        rows[(tag, kind, mode)] = per
for (tag, kind, mode), per in rows.items():
    off = rows[(tag, kind, "off")]
    print(f"{tag:5s} {kind:5s} {mode:9s} {per:12.2f}  extra {per - off:+10.2f}  ratio {per / off:.3f}")
