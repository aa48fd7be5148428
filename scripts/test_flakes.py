#!/usr/bin/env python3
"""Summarise a flake hunt (scripts/test-flakes.sh): every test that failed
in at least one of the `go test -json` event files, how many of the N
rounds it failed in, and the first lines of its first failure.

Exit 1 when any test failed; print "no failure in N rounds" otherwise.

usage: test_flakes.py N EVENTS.json...
"""
import sys

from test_skips import read_events


def failures(path):
    """{(package, test): output lines} of the tests that failed in one
    file; a package that failed outside any test (a build error, a panic
    in init, a timeout) counts as the test "(package)"."""
    output, failed = {}, set()
    for e in read_events(path):
        key = (e.get("Package", ""), e.get("Test") or "(package)")
        if e.get("Action") == "output":
            output.setdefault(key, []).append(e.get("Output", ""))
        elif e.get("Action") == "fail":
            failed.add(key)
    # A parent fails with its failed subtest; name the subtest alone.
    leaves = {k for k in failed
              if not any(o != k and o[0] == k[0] and o[1].startswith(k[1] + "/") for o in failed)}
    # A package fails with its failed tests; keep "(package)" only when
    # no test of it failed.
    leaves = {k for k in leaves
              if k[1] != "(package)" or not any(o[0] == k[0] and o[1] != "(package)" for o in leaves)}
    return {k: output.get(k, []) for k in leaves}


def main(n, paths):
    seen, first = {}, {}
    for p in paths:
        for key, out in failures(p).items():
            seen[key] = seen.get(key, 0) + 1
            first.setdefault(key, (p, out))
    if not seen:
        print(f"test-flakes: no failure in {n} rounds")
        return 0
    print(f"test-flakes: {len(seen)} tests failed at least once in {n} rounds")
    for (pkg, test), times in sorted(seen.items()):
        path, out = first[(pkg, test)]
        said = [l.rstrip() for l in out if l.strip() and not l.startswith(("=== ", "--- "))][:12]
        print(f"\n{pkg} {test}: failed in {times} of {n} rounds (first in {path})")
        for l in said:
            print("    " + l.strip())
    return 1


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(int(sys.argv[1]), sys.argv[2:]))
