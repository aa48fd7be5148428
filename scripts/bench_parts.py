"""The summary of make bench's part rows (scripts/bench.sh runs it last).

    bench_parts.py RESULTS OUT ROUNDS HFILE_CELLS SNAPSHOT_ROWS PUTS BATCH

Reads RESULTS, the raw measurements bench.sh's measure() appended, one JSON
line each: round, side (rekey or java), label, peak_rss_kb, cluster_cpu_s
and the command's own JSON line as result (cells_per_sec, cells, and per
command seconds, cpu_seconds, bare_over_merged, two_over_one, ...).
$READ_PASSES is the timed passes each snapshot-read command made.

Prints rekey beside the Java baseline per operation (median cells/s of the
rounds, ratio, largest peak RSS), then the read path's own ratios, and
writes the same rows with machine, versions and sizes to OUT as JSON
(bench/results/parts.json; the end-to-end bench copies it into latest.json).
"""
import json
import os
import statistics
import sys

import bench_meta

# The read path's ratios between two rekey rows (issue 14's goals):
# (what, numerator label, denominator label, goal).
PAIR_RATIOS = [
    ("HDFS / local copy", "read-snapshot", "read-snapshot local copy", ">= 0.80"),
    ("local copy / bare store files", "read-snapshot local copy", "read-storefiles local copy", ">= 0.70"),
    ("3-way merge: HDFS / local copy", "read-snapshot 3-way merge", "read-snapshot 3-way merge local copy", ">= 0.80"),
    ("3-way merge: local / bare store files", "read-snapshot 3-way merge local copy", "read-storefiles 3-way merge local copy", ">= 0.70"),
    ("2 workers / 1 worker", "read-snapshot 2 workers", "read-snapshot", ">= 1.8"),
    ("2 workers / 1 worker, local copy", "read-snapshot local copy 2 workers", "read-snapshot local copy", ""),
    ("read-ahead on / off", "read-snapshot", "read-snapshot, read-ahead off", ""),
]

# The local / bare and 2-worker / 1-worker ratios again, measured
# alternating in one process (each round: a bare pass then a snapshot
# pass, or a 1-worker pass then a 2-worker one): (what, label, the result
# field holding the median round's ratio, goal).
ALTERNATING_RATIOS = [
    ("local / bare, alternating in one process", "merge-cost local copy", "bare_over_merged", ">= 0.70"),
    ("3-way: local / bare, alternating in one process", "merge-cost 3-way merge local copy", "bare_over_merged", ">= 0.70"),
    ("2 workers / 1, HDFS, alternating in one process", "worker-scaling", "two_over_one", ">= 1.8"),
    ("2 workers / 1, local, alternating in one process", "worker-scaling local copy", "two_over_one", ">= 1.8"),
]

# rekey's snapshot read against TableSnapshotScanner: (what, label).
SCANNER_RATIOS = [
    ("vs TableSnapshotScanner, 1 core", "read-snapshot"),
    ("vs TableSnapshotScanner, 1 core, 1M cells", "read-snapshot 1M cells"),
]

NOTES = ("cells/s is each side's own in-process figure (JVM start excluded), the median of the rounds; "
         "peak RSS is the whole process's, the largest of the rounds; ratio = rekey / java (above 1: rekey is faster); "
         "reads pinned to one core with taskset except the 2-worker rows; "
         "each snapshot-read command (both sides) runs a warm-up pass and READ_PASSES timed passes and reports the median pass.")


def load(path):
    """The raw measurements grouped by (side, label), in the order each
    pair first appears."""
    raw = [json.loads(l) for l in open(path) if l.strip()]
    rows = {}
    for r in raw:
        rows.setdefault((r["side"], r["label"]), []).append(r)
    return rows


def row(rows, side, label):
    """One side's row of a label: the median cells/s of its rounds and the
    largest peak RSS; None when that side has no rounds of it."""
    rs = rows.get((side, label))
    if not rs:
        return None
    return {"side": side, "label": label, "rounds": len(rs),
            "cells_per_sec": round(statistics.median(x["result"]["cells_per_sec"] for x in rs)),
            "cells": rs[0]["result"].get("cells"),
            "peak_rss_mb": round(max(x["peak_rss_kb"] for x in rs) / 1024)}


def baseline(rows, label, r):
    """The Java row rekey's row r of label is held against: the same label,
    or for a 2-worker row the 1-worker one; None when there is none, or
    when the two counted different cells (printed: the ratio would mean
    nothing)."""
    base = row(rows, "java", label) or row(rows, "java", label.replace(" 2 workers", ""))
    if base and base["cells"] is not None and r["cells"] is not None and base["cells"] != r["cells"]:
        print(f'{label:40} cell counts differ: rekey {r["cells"]}, java {base["cells"]}: no ratio')
        return None
    return base


def compare(rows):
    """Prints every rekey row beside its Java baseline and returns them as
    the result's rows."""
    table = []
    print(f'{"operation":40} {"rekey cells/s":>14} {"java cells/s":>14} {"ratio":>7} {"rekey RSS MB":>13} {"java RSS MB":>12}')
    for side, label in rows:
        if side != "rekey" or label == BOOKKEEPING:
            continue
        r = row(rows, "rekey", label)
        base = baseline(rows, label, r)
        ratio = round(r["cells_per_sec"] / base["cells_per_sec"], 2) if base else None
        table.append({"label": label, "rekey": r, "java": base, "ratio": ratio})
        jc = f'{base["cells_per_sec"]:14,}' if base else f'{"-":>14}'
        jr = f'{base["peak_rss_mb"]:12}' if base else f'{"-":>12}'
        rt = f'{ratio:7.2f}' if ratio is not None else f'{"-":>7}'
        print(f'{label:40} {r["cells_per_sec"]:14,} {jc} {rt} {r["peak_rss_mb"]:13} {jr}')
    return table


def med(rows, label, f):
    """The median of f over rekey's rounds of label, leaving out the rounds
    where f is None; None when no round has it."""
    rs = rows.get(("rekey", label)) or []
    vals = [f(x) for x in rs if f(x) is not None]
    return statistics.median(vals) if vals else None


def pair_ratios(table):
    """Prints and returns PAIR_RATIOS, from the rekey rows' cells/s."""
    rk = {t["label"]: t["rekey"]["cells_per_sec"] for t in table}
    ratios = []
    for what, a, b, goal in PAIR_RATIOS:
        if a in rk and b in rk:
            ratios.append({"what": what, "ratio": round(rk[a] / rk[b], 2), "goal": goal})
            print(f'{what:40} {rk[a] / rk[b]:7.2f}   goal {goal}')
    return ratios


def alternating_ratios(rows):
    """Prints and returns ALTERNATING_RATIOS: the median over the bench
    rounds of each command's own median-round ratio."""
    ratios = []
    for what, label, field, goal in ALTERNATING_RATIOS:
        v = med(rows, label, lambda x: x["result"].get(field)) if rows.get(("rekey", label)) else None
        if v is not None:
            ratios.append({"what": what, "ratio": round(v, 2), "goal": goal})
            print(f'{what:40} {v:7.2f}   goal {goal}')
    return ratios


def scanner_ratios(table):
    """Prints and returns SCANNER_RATIOS, the rows' own rekey / java."""
    ratios = []
    for what, label in SCANNER_RATIOS:
        t = next((t for t in table if t["label"] == label), None)
        if t and t["ratio"] is not None:
            ratios.append({"what": what, "ratio": t["ratio"], "goal": ">= 10"})
            print(f'{what:40} {t["ratio"]:7.2f}   goal >= 10')
    return ratios


def two_core_ceiling(rows, passes):
    """What 2 cores allow 2 workers over HDFS: the DataNode serving the
    blocks runs on the same cores. Per pass, the reader's CPU (its own
    median pass) plus the cluster JVM's (over the whole command: the warm-up
    pass and READ_PASSES timed ones, so divided by their count, passes): on
    2 cores that work takes at least half its sum, so one worker's wall time
    over that is the most 2 workers can gain. The JVM's idle work (a few
    percent of a core) is counted in, which lowers the ceiling slightly.
    Printed; returns the ratio as a list of none or one."""
    one_wall = med(rows, "read-snapshot", lambda x: x["result"].get("seconds"))
    cpu2 = med(rows, "read-snapshot 2 workers", lambda x: x["result"].get("cpu_seconds"))
    dn2 = med(rows, "read-snapshot 2 workers", lambda x: x["cluster_cpu_s"] / passes if "cluster_cpu_s" in x else None)
    if not (one_wall and cpu2 and dn2 is not None):
        return []
    ceiling = one_wall / ((cpu2 + dn2) / 2)
    print(f'{"2 workers / 1 worker, ceiling on 2 cores":40} {ceiling:7.2f}   (per pass: reader {cpu2:.3f} CPU s + cluster JVM {dn2:.3f} CPU s on 2 cores, against 1 worker\'s {one_wall:.3f} s)')
    return [{"what": "2 workers / 1 worker, HDFS: what 2 shared cores allow", "ratio": round(ceiling, 2), "goal": "",
             "reader_cpu_s": round(cpu2, 3), "cluster_cpu_s": round(dn2, 3), "one_worker_s": round(one_wall, 3)}]


def alternating_ceiling(rows, passes):
    """The same bound for the alternating row, from its one-worker passes:
    one worker over HDFS keeps more than one core busy (its read-ahead
    beside it, the DataNode on the other core), and 2 cores hold 2 / that
    many such workers. The cluster JVM's CPU is per command (a warm-up and
    READ_PASSES passes of each count), so per pass it is divided by twice
    passes. Printed; returns the ratio as a list of none or one."""
    one_s = med(rows, "worker-scaling", lambda x: x["result"].get("one_worker_seconds"))
    one_cpu = med(rows, "worker-scaling", lambda x: x["result"].get("one_worker_cpu_seconds"))
    dn = med(rows, "worker-scaling", lambda x: x["cluster_cpu_s"] / (2 * passes) if "cluster_cpu_s" in x else None)
    if not (one_s and one_cpu and dn is not None):
        return []
    busy = (one_cpu + dn) / one_s
    print(f'{"2 workers / 1, HDFS, alternating: ceiling":40} {2 / busy:7.2f}   (one worker keeps {busy:.2f} cores busy: reader {one_cpu:.3f} CPU s + cluster JVM {dn:.3f} CPU s in {one_s:.3f} s)')
    return [{"what": "2 workers / 1, HDFS, alternating: what 2 cores allow", "ratio": round(2 / busy, 2), "goal": "",
             "one_worker_cores_busy": round(busy, 2), "one_worker_reader_cpu_s": round(one_cpu, 3),
             "cluster_cpu_s": round(dn, 3), "one_worker_s": round(one_s, 3)}]


BOOKKEEPING = "bookkeeping"


def bookkeeping(rows):
    """Prints the bookkeeping row (benchtool bookkeeping: each phase at each
    region count, in ms per 1,000 regions and the phase's peak RSS) and
    returns its phases; [] when it was not measured."""
    rs = rows.get(("rekey", BOOKKEEPING))
    if not rs:
        return []
    phases = rs[-1]["result"]["phases"]
    print(f'{"bookkeeping, ms per 1,000 regions (peak RSS MB)":48}', end="")
    sizes = sorted({p["regions"] for p in phases})
    print("".join(f'{n:>20,}' for n in sizes))
    for name in dict.fromkeys(p["phase"] for p in phases):
        cells = {p["regions"]: p for p in phases if p["phase"] == name}
        print(f'  {name:46}' + "".join(f'{cells[n]["ms_per_1000_regions"]:>12.1f} ({cells[n]["peak_rss_mb"]:>5.0f})' if n in cells else f'{"-":>20}' for n in sizes))
    return phases


def main():
    results, out_path, rounds, hcells, rows_n, puts, batch = sys.argv[1:]
    read_passes = int(os.environ.get("READ_PASSES", "1"))
    rows = load(results)
    table = compare(rows)
    print()
    # Each snapshot-read command makes a warm-up pass beside its timed ones.
    passes = read_passes + 1
    ratios = (pair_ratios(table) + alternating_ratios(rows) + scanner_ratios(table)
              + two_core_ceiling(rows, passes) + alternating_ceiling(rows, passes))
    print()
    books = bookkeeping(rows)
    doc = {"bench": "parts", "date": bench_meta.now(), "rounds": int(rounds),
           "sizes": {"hfile_cells": int(hcells), "snapshot_rows": int(rows_n), "puts": int(puts), "batch": int(batch)},
           "machine": bench_meta.machine(), "versions": bench_meta.versions(),
           "rows": table, "read_path_ratios": ratios, "bookkeeping": books,
           "notes": NOTES,
           "read_passes": read_passes}
    bench_meta.write_json(out_path, doc)
    print(f"\nmedians of {rounds} rounds written to {out_path}")


if __name__ == "__main__":
    main()
