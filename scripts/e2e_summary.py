"""The end-to-end bench's record (scripts/bench-e2e.sh runs it last).

    e2e_summary.py RUNS OUT SIZE ROUNDS BATCH SOURCE EXPECTED VERIFY

Reads RUNS (runs.jsonl: one JSON line per contender and round, with status
ok, failed or wrong, the whole process's wall_s, cpu_s and peak_rss_kb, the
target's digest and the contender's own result line), SOURCE and EXPECTED
(the oracle's digests of the snapshot and of its re-keyed cells), VERIFY
(verify.jsonl, e2e_verify_row.py's lines) and, when $BENCH_PARTS names an
existing file, make bench's part rows (bench_parts.py's JSON).

Writes OUT (bench/results/latest.json): per contender the medians of its ok
rounds (wall, CPU, cells/s, MB/s, peak RSS, the speed-up of the fastest
rekey contender over it) beside every run, the verify rows, machine,
versions and sizes. Prints the per-contender table.
"""
import json
import os
import statistics
import sys

import bench_meta

NOTES = ("wall_s, cpu_s and peak RSS are of the whole process (JVM start included), medians over the ok rounds; "
         "the mini cluster shares the same cores, so put and bulk-load figures include the cluster's work; "
         "rekey_speedup = contender wall / fastest rekey wall (above 1: rekey is faster).")


def read_lines(path):
    """The JSON values of a file of JSON lines, blank lines skipped."""
    return [json.loads(l) for l in open(path) if l.strip()]


def summarize(runs, source):
    """One row per contender, in the order they first ran: rounds run and
    ok, and over the ok rounds the median wall and CPU seconds, the largest
    peak RSS, and the source's cells and bytes over the median wall."""
    # Bytes read (KeyValue key + value per cell) as the Java and Spark
    # contenders count them: the same source for every contender.
    src_bytes = next((r["result"]["bytes"] for r in runs if r["status"] == "ok" and r["result"] and r["result"].get("bytes")), None)
    summary = []
    for c in dict.fromkeys(r["contender"] for r in runs):
        ok = [r for r in runs if r["contender"] == c and r["status"] == "ok"]
        row = {"contender": c, "rounds_ok": len(ok), "rounds": sum(1 for r in runs if r["contender"] == c)}
        if ok:
            wall = statistics.median(r["wall_s"] for r in ok)
            row.update(wall_s=wall, cpu_s=statistics.median(r["cpu_s"] for r in ok),
                       peak_rss_mb=round(max(r["peak_rss_kb"] for r in ok) / 1024),
                       cells_per_sec=round(source["cells"] / wall),
                       mb_per_sec=round(src_bytes / wall / 1e6, 2) if src_bytes else None)
        summary.append(row)
    return summary


def add_speedups(summary):
    """Sets each row's rekey_speedup: its wall over the fastest rekey
    contender's (None where either is missing)."""
    rk = [s for s in summary if s["contender"].startswith("rekey-") and "wall_s" in s]
    best = min((s["wall_s"] for s in rk), default=None)
    for s in summary:
        s["rekey_speedup"] = round(s["wall_s"] / best, 2) if best and "wall_s" in s else None


def print_table(summary, source, expected, out_path):
    """Prints one line per contender and where the record went."""
    print(f'{"contender":16} {"ok":>5} {"wall s":>8} {"cells/s":>10} {"MB/s":>6} {"CPU s":>7} {"RSS MB":>7} {"rekey x":>8}')
    for s in summary:
        if "wall_s" not in s:
            print(f'{s["contender"]:16} {s["rounds_ok"]}/{s["rounds"]:<3} not measured (failed or wrong)')
            continue
        sp = f'{s["rekey_speedup"]:.2f}' if s["rekey_speedup"] else "-"
        print(f'{s["contender"]:16} {s["rounds_ok"]}/{s["rounds"]:<3} {s["wall_s"]:8.1f} {s["cells_per_sec"]:10,} {s["mb_per_sec"] or 0:6.1f} {s["cpu_s"]:7.1f} {s["peak_rss_mb"]:7} {sp:>8}')
    print(f"source {source['cells']} cells; expected target {expected['cells']} cells; results: {out_path}")


def main():
    runs_path, out_path, size, rounds, batch, src_path, exp_path, verify_path = sys.argv[1:]
    verify_rows = read_lines(verify_path)
    runs = read_lines(runs_path)
    source, expected = json.load(open(src_path)), json.load(open(exp_path))
    summary = summarize(runs, source)
    add_speedups(summary)
    doc = {
        "bench": "e2e", "date": bench_meta.now(),
        "size": size, "rounds": int(rounds), "batch": int(batch),
        "machine": bench_meta.machine(), "versions": bench_meta.versions(),
        "source": source, "expected_target": expected,
        "summary": summary, "runs": runs, "verify": verify_rows,
        "notes": NOTES,
    }
    # make bench measures the parts first: their rows go in the same record.
    parts_path = os.environ.get("BENCH_PARTS")
    if parts_path and os.path.exists(parts_path):
        doc["parts"] = json.load(open(parts_path))
    bench_meta.write_json(out_path, doc)
    print_table(summary, source, expected, out_path)


if __name__ == "__main__":
    main()
