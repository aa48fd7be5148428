#!/usr/bin/env python3
"""Turn a `make compat` run into its matrix: HBase version x suite.

Reads the rows scripts/compat.sh recorded (version, suite, exit status,
seconds, go test -json events file) and its step times (version, step,
seconds); writes results JSON and, with --docs and --readme, docs/compat.md
and the README's marked block. Exits 1 when any suite did not pass.

usage: compat_matrix.py ROWS.tsv TIMES.tsv --json OUT.json
                        [--docs docs/compat.md --readme README.md]
"""
import argparse
import datetime
import json
import re
import subprocess
import sys

BEGIN = "<!-- compat:begin (scripts/compat.sh rewrites this block) -->"
END = "<!-- compat:end -->"


def read_tsv(path):
    """The tab-separated rows of PATH, as lists of strings."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def top_level_results(events_path):
    """{(package, test): action} for every top-level test that ended, and
    the packages that failed outside any test (a build error, a panic)."""
    results, broken = {}, set()
    if events_path == "-":
        return results, broken
    with open(events_path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            e = json.loads(line)
            action, test = e.get("Action"), e.get("Test")
            if action not in ("pass", "fail", "skip"):
                continue
            if test is None:
                if action == "fail":
                    broken.add(e.get("Package", ""))
            elif "/" not in test:
                results[(e.get("Package", ""), test)] = action
    return results, broken


def suite_result(exit_status, seconds, events_path):
    """One suite's status (passed, failed, skipped or no tests), its tests
    by outcome, and its seconds."""
    results, broken = top_level_results(events_path)
    by = {a: sorted(f"{p.rsplit('/', 1)[-1]}.{t}" for (p, t), r in results.items() if r == a)
          for a in ("pass", "fail", "skip")}
    if exit_status != "0" or by["fail"] or broken:
        status = "failed"
    elif by["skip"]:
        status = "skipped"
    elif not by["pass"]:
        status = "no tests"
    else:
        status = "passed"
    return {"status": status, "seconds": float(seconds), "passed": by["pass"],
            "failed": by["fail"], "skipped": by["skip"], "broken_packages": sorted(broken)}


def git(*args):
    """Output of a git command, stripped."""
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def commit():
    """HEAD's short hash, marked -dirty when tracked files differ from it."""
    head = git("rev-parse", "--short=7", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("-dirty" if dirty else "")


def build(rows, times):
    """The results document."""
    versions = {}
    for version, suite, status, seconds, events in rows:
        v = versions.setdefault(version, {"suites": {}, "seconds": {}})
        v["suites"][suite] = suite_result(status, seconds, events)
    for version, step, seconds in times:
        versions.setdefault(version, {"suites": {}, "seconds": {}})["seconds"][step] = float(seconds)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "versions": versions,
    }


def suites_in_order(doc):
    """Every suite name, in the order the run first met it."""
    names = []
    for v in doc["versions"].values():
        for s in v["suites"]:
            if s not in names:
                names.append(s)
    return names


def matrix(doc):
    """The version x suite table in Markdown, with each version's seconds."""
    names = suites_in_order(doc)
    lines = ["| HBase | " + " | ".join(f"`{n}`" for n in names) + " | seconds |",
             "|---" * (len(names) + 2) + "|"]
    for version, v in doc["versions"].items():
        cells = [v["suites"][n]["status"] if n in v["suites"] else "-" for n in names]
        total = v["seconds"].get("total")
        lines.append(f"| {version} | " + " | ".join(cells) + f" | {total if total is not None else '-'} |")
    return lines


def readme_block(doc):
    """The README's marked block: the matrix and when and where it ran."""
    return [BEGIN, "",
            "2.5.11-hadoop3 is testenv's default: `make test` runs every suite on it.",
            f"Beside it, `make compat` last ran on {doc['date']} at commit `{doc['commit']}`",
            "(suites and timings: [docs/compat.md](docs/compat.md)):", "",
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
           f"Last run: {doc['date']}, commit `{doc['commit']}`.", "",
           "Each suite runs existing integration tests against a mini cluster of",
           "that HBase version (testenv, `HBASE_VERSION`); the tests compare rekey",
           "with what that version's own client and readers return. The 1.7.2 row",
           "reads snapshots HBase 1.7.2 wrote (testenv/hbase1), against 1.7.2's dump.", "",
           *matrix(doc), "", "## Tests per suite", ""]
    for version, v in doc["versions"].items():
        out.append(f"### {version}")
        out.append("")
        for name, s in v["suites"].items():
            detail = ", ".join(s["passed"]) or "none passed"
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
    ap.add_argument("rows")
    ap.add_argument("times")
    ap.add_argument("--json", required=True)
    ap.add_argument("--docs")
    ap.add_argument("--readme")
    a = ap.parse_args()
    doc = build(read_tsv(a.rows), read_tsv(a.times))
    with open(a.json, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    if a.docs:
        with open(a.docs, "w", encoding="utf-8") as f:
            f.write("\n".join(docs_page(doc)) + "\n")
    if a.readme:
        rewrite_readme(a.readme, readme_block(doc))
    print("\n".join(matrix(doc)))
    bad = [(v, n) for v, d in doc["versions"].items() for n, s in d["suites"].items() if s["status"] != "passed"]
    for v, n in bad:
        print(f"compat: {v} {n}: {doc['versions'][v]['suites'][n]['status']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
