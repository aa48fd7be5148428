#!/usr/bin/env python3
"""Print what the failed tests of `go test -json` runs said.

The compat suites keep their test events in files (bin/compat/V/*.json)
and print only a pass/fail table; a failure in CI is then known only by
name. This prints, for each test that failed and has no failed subtest,
its last output lines (the t.Log, t.Error and panic lines), and for a
package that failed outside any test (a build error, a timeout), the
package's own last lines.

usage: test_failures.py [--lines N] EVENTS.json...
"""
import argparse
import json


def read_events(path):
    """The test events of one file, one JSON object a line; other lines are
    ignored (go test prints build errors as plain text)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def failures(events):
    """(package, test or "", output lines) of each failed leaf test, and of
    each failed package none of whose tests failed."""
    output, failed, build = {}, [], []
    for e in events:
        key = (e.get("Package", ""), e.get("Test", ""))
        if e.get("Action") == "build-output":
            # The compiler's messages name no package's test run.
            build.append(e.get("Output", "").rstrip("\n"))
        elif e.get("Action") == "output":
            output.setdefault(key, []).append(e.get("Output", "").rstrip("\n"))
        elif e.get("Action") == "fail":
            failed.append(key)
    failed_set = set(failed)
    out = []
    for pkg, test in failed:
        if test:
            # A parent fails with its subtests; the subtest says why.
            if any(p == pkg and t.startswith(test + "/") for p, t in failed_set):
                continue
        elif any(p == pkg and t for p, t in failed_set):
            continue
        lines = output.get((pkg, test), [])
        if not test and build:
            lines = build + lines
        out.append((pkg, test, lines))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=40, help="last lines printed per failure")
    ap.add_argument("events", nargs="+")
    args = ap.parse_args()
    for path in args.events:
        for pkg, test, lines in failures(read_events(path)):
            lines = [l for l in lines if not l.startswith(("=== RUN", "=== PAUSE", "=== CONT"))]
            print(f"--- failed: {pkg} {test or '(package)'} ({path})")
            for line in lines[-args.lines:]:
                print("    " + line)


if __name__ == "__main__":
    main()
