#!/usr/bin/env python3
"""Summarise the skipped tests of a `go test -json` run, and fail on the
ones that must not skip.

Reads the JSON test events gotestsum wrote (`--jsonfile`), prints one line
per skipped test with the reason it gave, and exits 1 when a test skipped
after testenv.Require had found the mini cluster (its output holds
testenv.IntegrationMarker): under `make test` the cluster is up, so such a
skip hides a claim the cluster could have judged.

usage: test_skips.py EVENTS.json
"""
import json
import sys

MARKER = "testenv: integration test on the mini cluster"


def read_events(path):
    """The test events, one JSON object a line; other lines are ignored."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                yield json.loads(line)


def skipped_tests(events):
    """(package, test, output lines, on the cluster) of every test that
    ended skipped; on the cluster when it or a test it runs under logged
    the marker."""
    output, skips = {}, []
    for e in events:
        test = e.get("Test")
        if not test:
            continue
        key = (e.get("Package", ""), test)
        if e.get("Action") == "output":
            output.setdefault(key, []).append(e.get("Output", ""))
        elif e.get("Action") == "skip":
            skips.append(key)
    marked = {k for k, lines in output.items() if any(MARKER in l for l in lines)}
    for pkg, test in skips:
        parts = test.split("/")
        ancestors = {(pkg, "/".join(parts[:i])) for i in range(1, len(parts) + 1)}
        yield pkg, test, output.get((pkg, test), []), bool(ancestors & marked)


def reason(lines):
    """The skip's own message: the output that is not go test's framing."""
    said = [l.strip() for l in lines
            if l.strip() and not l.lstrip().startswith(("=== ", "--- ")) and MARKER not in l]
    return " ".join(said) or "(no reason given)"


def main(path):
    bad = 0
    skips = sorted(skipped_tests(read_events(path)))
    print(f"skipped tests: {len(skips)}")
    for pkg, test, lines, integration in skips:
        bad += integration
        tag = "INTEGRATION TEST SKIPPED WITH THE CLUSTER UP" if integration else "skip"
        print(f"  {tag}: {pkg.removeprefix('github.com/rekeyhq/rekey/')} {test}: {reason(lines)}")
    if bad:
        print(f"test: {bad} integration test(s) skipped while the cluster was up", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
