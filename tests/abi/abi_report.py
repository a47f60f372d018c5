"""What the tests/abi/check_*.py scripts print: a check's problems and its
verdict, and a selftest's (the checker must report what was planted)."""


def report(problems, ok):
    """Each problem and their count (returns 1), or the ok line (returns 0)."""
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print(ok)
    return 0


def selftest_verdict(found, want):
    """Each wanted report that is not among found, named (returns 1), or 0."""
    missed = [w for w in want if not any(w in p for p in found)]
    for w in missed:
        print(f"selftest: the checker did not report '{w}'")
    return 1 if missed else 0
