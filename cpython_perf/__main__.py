import sys

from .errors import MatrixError

try:
    from .cli import main
except MatrixError as exc:
    # matrix.yaml's arch_facts are read when the driver is imported: a malformed entry is the user's to fix,
    # said as every other matrix error is, without a traceback
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(exc.exit_code) from None

raise SystemExit(main())
