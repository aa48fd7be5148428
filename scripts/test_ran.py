#!/usr/bin/env python3
"""Fail unless a `go test -json` run ran exactly the expected number of
top-level tests whose names start with a prefix, each to pass or fail.

A pass selected by -run (the destructive pass) that matched nothing, or
fewer tests than the source defines, would otherwise report success
while proving nothing.

usage: test_ran.py EVENTS.json PREFIX COUNT
"""
import sys

from test_skips import read_events


def main(path, prefix, want):
    ran = set()
    for e in read_events(path):
        test = e.get("Test", "")
        if e.get("Action") in ("pass", "fail") and test.startswith(prefix) and "/" not in test:
            ran.add((e.get("Package", ""), test))
    print(f"{prefix}*: {len(ran)} of {want} tests ran")
    if len(ran) != want:
        for pkg, test in sorted(ran):
            print(f"  ran: {pkg} {test}")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
