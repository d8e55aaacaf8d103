"""cginstr.py FILE.cg: self cost per instruction address from a callgrind --dump-instr=yes output, as
{(fn, addr): Ir}.  Import or run: prints the sum per function."""
import re, sys
from collections import defaultdict

def parse(path):
    names = {}
    def name(kind, tok):
        m = re.match(r"\((\d+)\)(?: (.*))?", tok)
        if not m:
            return tok
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names[key]
    cost = defaultdict(int)
    fn = None; addr = 0; line = 0; skip = False
    pos_re = re.compile(r"^([+-]?(?:0x[0-9a-fA-F]+|\d+)|\*)$")
    def sub(tok, prev, hexa):
        if tok == "*": return prev
        if tok[0] in "+-":
            return prev + int(tok, 0)
        return int(tok, 16) if tok.startswith("0x") else int(tok)
    for raw in open(path):
        raw = raw.rstrip("\n")
        if not raw: continue
        c = raw[0]
        if c.isdigit() or c in "+-*" or raw.startswith("0x"):
            parts = raw.split()
            addr = sub(parts[0], addr, True)
            line = sub(parts[1], line, False)
            ir = int(parts[2]) if len(parts) > 2 else 0
            if skip:
                skip = False
                continue
            cost[(fn, addr)] += ir
            continue
        if raw.startswith("fn="):
            fn = name("fn", raw[3:])
        elif raw.startswith(("cfn=", "cfi=", "cfl=")):
            name("fn" if raw.startswith("cfn") else "fl", raw[4:])  # register compressed names
        elif raw.startswith(("fl=", "fi=", "fe=")):
            name("fl", raw[3:])
        elif raw.startswith("ob=") or raw.startswith("cob="):
            pass
        elif raw.startswith("calls="):
            skip = True
    return cost

if __name__ == "__main__":
    per = defaultdict(int)
    for (f, a), v in parse(sys.argv[1]).items():
        per[f] += v
    for f, v in sorted(per.items(), key=lambda x: -x[1])[:15]:
        print(v, f)
    print(sum(per.values()))
