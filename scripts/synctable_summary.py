"""The record of scripts/bench-synctable.sh: HBase's HashTable + SyncTable
against rekey verify on one pair of tables with three planted differences.

    synctable_summary.py row-mr CONTENDER ROUND LOAD HASH_TIME HASH_OUT SYNC_TIME SYNC_OUT
    synctable_summary.py row-rekey CONTENDER ROUND LOAD TIME REPORT
        print one run's JSON line; TIME is "wall user sys rss_kb
        children_cpu cluster_cpu" (GNU time's figures for the whole process,
        then the growth of the cluster process's reaped children's CPU and
        of its own CPU over the run), *_OUT the oracle's JSON line, REPORT
        rekey verify's --json report
    synctable_summary.py line            one run's line (stdin) in words
    synctable_summary.py summary RUNS PLANTED OUT CUSTOMERS CELLS
        check every run against PLANTED (synctable_data.py's), write OUT:
        per contender the median of its measured rounds (round 0 is the
        warm-up), and the ratios to rekey-verify, only when both it and
        hashtable+synctable found every planted difference in every run

A run that missed a planted difference, or reported one that was not
planted, has status "wrong" and no ratio is computed from it.
"""
import json
import statistics
import sys

import bench_meta

SYNC_WANT = {"TARGETMISSINGCELLS": 1, "DIFFERENTCELLVALUES": 1, "SOURCEMISSINGROWS": 1,
             "SOURCEMISSINGCELLS": 1, "TARGETMISSINGROWS": 0}


def times(s):
    wall, user, sys_s, rss, children, cluster = s.split()
    return float(wall), float(user) + float(sys_s), int(rss), float(children), float(cluster)


def row_mr(contender, rnd, load, hash_time, hash_out, sync_time, sync_out):
    parts = []
    for t, out in ((hash_time, hash_out), (sync_time, sync_out)):
        wall, cpu, rss, children, cluster = times(t)
        try:
            res = json.loads(open(out).read().strip().splitlines()[-1])
        except (IndexError, ValueError):
            res = None
        parts.append({"wall_s": wall, "process_cpu_s": round(cpu, 2), "peak_rss_kb": rss,
                      "containers_cpu_s": children, "cluster_process_cpu_s": cluster, "result": res})
    ok = all(p["result"] for p in parts)
    tasks = sum(p["result"]["tasks_cpu_ms"] for p in parts) / 1000 if ok else None
    row = {"contender": contender, "round": rnd, "load_avg_before": load,
           "wall_s": round(sum(p["wall_s"] for p in parts), 2),
           # The brief's measure: the client processes (whole JVMs) and
           # every task's CPU as MapReduce counts it.
           "cpu_s": round(sum(p["process_cpu_s"] for p in parts) + tasks, 2) if ok else None,
           "tasks_cpu_s": tasks,
           # Every container, the ApplicationMasters included, as the OS
           # counted it for the cluster process's reaped children.
           "cpu_with_containers_s": round(sum(p["process_cpu_s"] + p["containers_cpu_s"] for p in parts), 2),
           "cluster_process_cpu_s": round(sum(p["cluster_process_cpu_s"] for p in parts), 2),
           "hashtable": parts[0], "synctable": parts[1],
           "status": "ok" if ok else "failed"}
    if ok:
        row["synctable_counters"] = parts[1]["result"]["counters"]
    return row


def row_rekey(contender, rnd, load, t, report):
    wall, cpu, rss, children, cluster = times(t)
    row = {"contender": contender, "round": rnd, "load_avg_before": load, "wall_s": wall, "cpu_s": round(cpu, 2),
           "peak_rss_kb": rss, "cluster_process_cpu_s": cluster, "status": "failed"}
    try:
        r = json.load(open(report))
    except ValueError:
        return row
    row["status"] = "ok"
    row["new_side"] = r.get("new_side")
    row["summary"] = r["summary"]
    row["mismatched_entities"] = {e["entity"]: {"mismatches": e.get("mismatches"),
                                                "first_differences": e.get("first_differences")}
                                  for e in r["entities"] if not e["match"]}
    return row


def check(row, planted):
    """The planted differences the run did not report, or anything it
    reported that was not planted, in words; empty when it found exactly
    those."""
    if row["status"] != "ok":
        return ["the run failed"]
    problems = []
    if row["contender"] == "hashtable+synctable":
        got = row["synctable_counters"]
        for k, want in SYNC_WANT.items():
            if got.get(k, 0) != want:
                problems.append(f"SyncTable {k}={got.get(k, 0)}, want {want}")
        return problems
    mism = row["mismatched_entities"]
    for p in planted.values():
        e = mism.get(p["entity"])
        if not e or e["mismatches"] != {p["class"]: 1}:
            problems.append(f"{p['entity']}: {e and e['mismatches']}, want {p['class']}=1")
            continue
        d = (e["first_differences"] or [{}])[0]
        if (d.get("old") or "").strip() != p["old"] or (d.get("new") or "").strip() != p["new"]:
            problems.append(f"{p['entity']}: first difference {d}, want old {p['old']!r} new {p['new']!r}")
    extra = set(mism) - {p["entity"] for p in planted.values()}
    if extra:
        problems.append(f"mismatched entities nothing was planted in: {sorted(extra)}")
    return problems


def line():
    r = json.loads(sys.stdin.read())
    s = f"{r['contender']} (round {r['round']}): {r['status']}, {r['wall_s']} s wall, {r['cpu_s']} s CPU"
    if r["contender"] == "hashtable+synctable" and r["status"] == "ok":
        s += f" (tasks {r['tasks_cpu_s']} s; all containers, AMs included, {r['cpu_with_containers_s'] - r['hashtable']['process_cpu_s'] - r['synctable']['process_cpu_s']:.1f} s); counters {r['synctable_counters']}"
    elif r["status"] == "ok":
        s += f", {r['new_side']}, mismatches {r['summary']['mismatches']}, {r['summary']['cells_compared']} cells compared"
    print(s)


def summary(runs_path, planted_path, out, customers, cells):
    planted = json.load(open(planted_path))
    runs = [json.loads(l) for l in open(runs_path) if l.strip()]
    for r in runs:
        problems = check(r, planted)
        if problems and r["status"] == "ok":
            r["status"] = "wrong"
        r["problems"] = problems
    rows = []
    for c in dict.fromkeys(r["contender"] for r in runs):
        measured = [r for r in runs if r["contender"] == c and r["round"] > 0]
        ok = [r for r in measured if r["status"] == "ok"]
        row = {"contender": c, "rounds": len(measured), "rounds_ok": len(ok),
               "all_planted_found": all(r["status"] == "ok" for r in runs if r["contender"] == c)}
        if ok:
            row["wall_s"] = statistics.median(r["wall_s"] for r in ok)
            row["cpu_s"] = statistics.median(r["cpu_s"] for r in ok)
            if c == "hashtable+synctable":
                row["hashtable_wall_s"] = statistics.median(r["hashtable"]["wall_s"] for r in ok)
                row["synctable_wall_s"] = statistics.median(r["synctable"]["wall_s"] for r in ok)
                row["tasks_cpu_s"] = statistics.median(r["tasks_cpu_s"] for r in ok)
                row["cpu_with_containers_s"] = statistics.median(r["cpu_with_containers_s"] for r in ok)
        rows.append(row)
    by = {r["contender"]: r for r in rows}
    mr, rk = by.get("hashtable+synctable"), by.get("rekey-verify")
    ratio = None
    if mr and rk and mr["all_planted_found"] and rk["all_planted_found"] and "wall_s" in mr and "wall_s" in rk:
        ratio = {"wall": round(mr["wall_s"] / rk["wall_s"], 1), "cpu": round(mr["cpu_s"] / rk["cpu_s"], 1)}
        for r in rows:
            if r["contender"].startswith("rekey-") and "wall_s" in r:
                r["speedup_wall"] = round(mr["wall_s"] / r["wall_s"], 1)
                r["speedup_cpu"] = round(mr["cpu_s"] / r["cpu_s"], 1)
    doc = {
        "bench": "verify-vs-synctable",
        "issue": 54,
        "measured_at": bench_meta.now(),
        "machine": bench_meta.machine(),
        "versions": bench_meta.versions(),
        "data": {"customers": int(customers), "cells": int(cells), "regions": 4,
                 "layout": "row = customer '|' order (decimal), columns amount and status in family o, 1 version; "
                           "identity job: the target keyed like the source",
                 "planted": planted},
        "method": ("each contender once as a warm-up (round 0), then measured rounds; each run a whole process "
                   "(JVM start included) started once the cluster is quiet, on the same 2 cores; seed, copy, plant "
                   "and YARN's start outside every timer. hashtable+synctable: HBase 2.5.11's HashTable (default "
                   "options) then SyncTable --dryrun=true, MapReduce on the mini cluster's YARN (MiniMRYarnCluster, "
                   "1 NodeManager of 2 vcores), wall = both client processes, cpu = both client JVMs + "
                   "CPU_MILLISECONDS of every task; cpu_with_containers_s counts every container (ApplicationMasters "
                   "too) from the cluster process's reaped children. rekey-verify: rekey verify --all --retries 0 "
                   "(the live target; no re-read, as SyncTable makes none), cpu = the process's user+system. "
                   "Region servers' CPU serving either is in neither figure (cluster_process_cpu_s per run)."),
        "contenders": rows,
        "ratio_hashtable_synctable_over_rekey_verify": ratio,
        "runs": runs,
    }
    bench_meta.write_json(out, doc)
    for r in rows:
        print(f"  {r['contender']:24} {r.get('wall_s', '-'):>8} s wall {r.get('cpu_s', '-'):>8} s CPU"
              f"  all planted found: {r['all_planted_found']}")
    if ratio:
        print(f"  hashtable+synctable / rekey-verify: {ratio['wall']}x wall, {ratio['cpu']}x CPU")
    else:
        print("  no ratio: a contender missed a planted difference or failed (see runs[].problems)")
    print(f"  load average now {bench_meta.machine()['load_avg_at_end']}; wrote {out}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "row-mr":
        print(json.dumps(row_mr(args[0], int(args[1]), args[2], *args[3:7])))
    elif cmd == "row-rekey":
        print(json.dumps(row_rekey(args[0], int(args[1]), args[2], args[3], args[4])))
    elif cmd == "line":
        line()
    elif cmd == "summary":
        summary(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
