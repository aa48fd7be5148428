#!/usr/bin/env python3
"""Turn `make compat` runs into the matrix: HBase version x suite.

Reads each version's directory scripts/compat.sh wrote under DIR: meta.tsv
(the commit and date it ran at), rows.tsv (suite, exit status, seconds, go
test -json events file) and times.tsv (step, seconds). Writes the results
JSON and, with --docs and --readme, docs/compat.md and the README's marked
block. Exits 1 when a suite of a version in --ran did not pass.

usage: compat_matrix.py DIR --json OUT.json [--ran VERSION...]
                        [--docs docs/compat.md --readme README.md]
"""
import argparse
import json
import os
import re
import sys

BEGIN = "<!-- compat:begin (scripts/compat.sh rewrites this block) -->"
END = "<!-- compat:end -->"


def read_tsv(path):
    """The tab-separated rows of PATH, as lists of strings."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def top_level_results(events_path):
    """{(package, test): action} for every top-level test that ended, the
    packages that failed outside any test (a build error, a panic),
    whether go test's -timeout stopped a package, and whether a test had
    failed before that (the tests running at a timeout are marked failed
    too, though nothing judged them)."""
    results, broken, timed_out, failed_first = {}, set(), False, False
    if events_path == "-":
        return results, broken, timed_out, failed_first
    with open(events_path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            action, test = e.get("Action"), e.get("Test")
            said = e.get("Output", "") if action == "output" else ""
            if said.startswith("panic: test timed out"):
                timed_out = True
            elif "--- FAIL" in said and not timed_out:
                failed_first = True
            if action not in ("pass", "fail", "skip"):
                continue
            if test is None:
                if action == "fail":
                    broken.add(e.get("Package", ""))
            elif "/" not in test:
                results[(e.get("Package", ""), test)] = action
            elif action == "pass" and test.count("/") == 1:
                results[(e.get("Package", ""), test)] = "subpass"
    return results, broken, timed_out, failed_first


def suite_result(exit_status, seconds, events_path):
    """One suite's status (passed, failed, timed out, skipped or no
    tests), its tests by outcome, and its seconds."""
    results, broken, timed_out, failed_first = top_level_results(events_path)
    by = {a: sorted(f"{p.rsplit('/', 1)[-1]}.{t}" for (p, t), r in results.items() if r == a)
          for a in ("pass", "fail", "skip", "subpass")}
    if timed_out and not failed_first:
        status = "timed out"
    elif exit_status != "0" or by["fail"] or broken:
        status = "failed"
    elif by["skip"]:
        status = "skipped"
    elif not by["pass"]:
        status = "no tests"
    else:
        status = "passed"
    # Subtests that passed under a top-level test that did not: what a
    # timed-out or failed test still showed.
    tops = {t.split("/")[0] for t in by["pass"]}
    partial = [t for t in by["subpass"] if t.split("/")[0] not in tops]
    return {"status": status, "seconds": float(seconds), "passed": by["pass"], "passed_subtests": partial,
            "failed": by["fail"], "skipped": by["skip"], "broken_packages": sorted(broken)}


def version_key(v):
    """Orders the rows: the cluster versions (2.x and later) by their
    numbers, then 1.x, whose row has a suite of its own."""
    numbers = [int(n) for n in re.findall(r"\d+", v.split("-")[0])]
    return (numbers[:1] == [1], numbers)


def read_version(path):
    """One version's results from its directory."""
    meta = dict(read_tsv(os.path.join(path, "meta.tsv")))
    suites = {suite: suite_result(status, seconds, events)
              for suite, status, seconds, events in read_tsv(os.path.join(path, "rows.tsv"))}
    seconds = {step: float(sec) for step, sec in read_tsv(os.path.join(path, "times.tsv"))}
    return {"commit": meta.get("commit", "?"), "date": meta.get("date", "?"),
            "suites": suites, "seconds": seconds}


def build(root):
    """The results document: every version directory under root."""
    names = [n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "meta.tsv"))]
    return {"versions": {n: read_version(os.path.join(root, n)) for n in sorted(names, key=version_key)}}


def suites_in_order(doc):
    """Every suite name, in the order the run first met it."""
    names = []
    for v in doc["versions"].values():
        for s in v["suites"]:
            if s not in names:
                names.append(s)
    return names


def matrix(doc):
    """The version x suite table in Markdown, with when each version ran
    and its seconds ("-": that suite does not apply to the version)."""
    names = suites_in_order(doc)
    lines = ["| HBase | " + " | ".join(f"`{n}`" for n in names) + " | ran | seconds |",
             "|---" * (len(names) + 3) + "|"]
    for version, v in doc["versions"].items():
        cells = [v["suites"][n]["status"] if n in v["suites"] else "-" for n in names]
        total = v["seconds"].get("total")
        lines.append(f"| {version} | " + " | ".join(cells) +
                     f" | {v['date']}, `{v['commit']}` | {total if total is not None else '-'} |")
    return lines


def readme_block(doc):
    """The README's marked block: the matrix and when and where it ran."""
    return [BEGIN, "",
            "2.5.11-hadoop3 is testenv's default: `make test` runs every suite on it,",
            "and `run-puts`, `run-hfiles` and `verify` on 3.0.0-alpha-4 as well.",
            "Beside it, `make compat` runs the suites where HBase is the judge on each",
            "version below (each row says when and at which commit it last ran; what",
            "each suite runs and the timings: [docs/compat.md](docs/compat.md)). The",
            "1.7.2 row reads snapshots HBase 1.7.2 wrote (NONE and GZ; NONE, PREFIX,",
            "DIFF, FAST_DIFF) against 1.7.2's own dump (`TestHBase1Snapshots`).", "",
            *matrix(doc), "", END]


def rewrite_readme(path, block):
    """Replace the marked block of the README at PATH."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        sys.exit(f"compat: {path} has no block between {BEGIN} and {END}")
    text = pattern.sub(lambda _: "\n".join(block), text, count=1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def docs_page(doc):
    """docs/compat.md: the matrix, what each suite ran, and the timings."""
    out = ["# HBase versions: the compatibility matrix", "",
           "Written by `make compat` (scripts/compat.sh); do not edit by hand.",
           "Each row's last run is dated and names its commit.", "",
           "Each suite runs existing integration tests against a mini cluster of",
           "that HBase version (testenv, `HBASE_VERSION`); the tests compare rekey",
           "with what that version's own client and readers return. The 1.7.2 row",
           "reads snapshots HBase 1.7.2 wrote (testenv/hbase1), against 1.7.2's dump.", "",
           *matrix(doc), "", "## Tests per suite", ""]
    for version, v in doc["versions"].items():
        out.append(f"### {version} ({v['date']}, `{v['commit']}`)")
        out.append("")
        for name, s in v["suites"].items():
            detail = ", ".join(s["passed"]) or "none passed"
            if s["passed_subtests"]:
                detail += " (subtests passed: " + ", ".join(s["passed_subtests"]) + ")"
            if s["failed"] or s["broken_packages"]:
                detail += "; FAILED: " + ", ".join(s["failed"] + s["broken_packages"])
            if s["skipped"]:
                detail += "; SKIPPED: " + ", ".join(s["skipped"])
            out.append(f"- `{name}` ({s['status']}, {s['seconds']} s): {detail}")
        out.append("")
    out += ["## Seconds per step", "",
            "| HBase | step | seconds |", "|---|---|---|"]
    for version, v in doc["versions"].items():
        for step, sec in v["seconds"].items():
            out.append(f"| {version} | {step} | {sec} |")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", required=True)
    ap.add_argument("--ran", nargs="*", default=[])
    ap.add_argument("--docs")
    ap.add_argument("--readme")
    a = ap.parse_args()
    doc = build(a.dir)
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    if a.docs:
        with open(a.docs, "w", encoding="utf-8") as f:
            f.write("\n".join(docs_page(doc)) + "\n")
    if a.readme:
        rewrite_readme(a.readme, readme_block(doc))
    print("\n".join(matrix(doc)))
    bad = [(v, n) for v, d in doc["versions"].items() if v in a.ran
           for n, s in d["suites"].items() if s["status"] != "passed"]
    for v, n in bad:
        print(f"compat: {v} {n}: {doc['versions'][v]['suites'][n]['status']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
