# requires: perf
# checks: behaviour
"""sys.activate_stack_trampoline() with an unknown backend raises
ValueError("invalid backend: <name>") and leaves the state unchanged; a
non-str argument raises TypeError.
"""
import sys


def main():
    before = sys.is_stack_trampoline_active()
    for name in ("foo", "PERF", "perf "):
        try:
            sys.activate_stack_trampoline(name)
        except ValueError as exc:
            if str(exc) != f"invalid backend: {name}":
                print(f"FAIL: wrong message for {name!r}: {str(exc)!r}")
                return 1
        else:
            print(f"FAIL: activate_stack_trampoline({name!r}) did not raise")
            return 1
    if sys.is_stack_trampoline_active() != before:
        print("FAIL: a rejected backend changed the trampoline state")
        return 1
    try:
        sys.activate_stack_trampoline(1)
    except TypeError:
        pass
    else:
        print("FAIL: activate_stack_trampoline(1) did not raise TypeError")
        return 1
    print("OK: ValueError('invalid backend: foo'), state unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
