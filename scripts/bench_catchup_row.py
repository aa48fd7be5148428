"""Rows and the summary of the catch-up bench (scripts/bench-catchup.sh).

    bench_catchup_row.py NAME STATUS STDOUT WALL USER SYS RSS_KB DIGEST
        prints one JSON row: the run's time (whole process), the bytes it
        read, its catch-up figures when it was one, and the target's digest;
    bench_catchup_row.py --summary ROWS.jsonl SIZE SHARE TOUCHED.json
        prints the result document: each case (flushed, compacted) with the
        catch-up and the whole run of the same snapshot side by side, and
        their ratios, only when both left their target as expected.
"""
import json
import sys

import bench_meta


def last_json(text):
    """The last whole JSON object in text (rekey run --json prints its
    summary last, indented)."""
    dec = json.JSONDecoder()
    found = None
    for i, ch in enumerate(text):
        if ch == "{" and (i == 0 or text[i - 1] == "\n"):
            try:
                found, _ = dec.raw_decode(text[i:])
            except ValueError:
                pass
    return found


def row(name, status, stdout, wall, user, sys_, rss, digest):
    sm = last_json(open(stdout).read()) or {}
    out = {"name": name, "status": status, "wall_s": float(wall), "cpu_s": round(float(user) + float(sys_), 2),
           "peak_rss_kb": int(rss), "cells_read": sm.get("cells_read"), "bytes_read": sm.get("bytes_read"),
           "target": json.loads(digest)}
    if sm.get("catchup"):
        out["catchup"] = sm["catchup"]
    return out


def summary(rows_path, size, share, touched_path):
    rows = {r["name"]: r for r in map(json.loads, open(rows_path))}
    cases = []
    for case, label in (("flushed", "1% of rows changed, flushed, no compaction"),
                        ("compacted", "then a major compaction (every file new)")):
        cu, full = rows.get("catchup-" + case), rows.get("full-" + case)
        if not cu or not full or cu["status"] != "ok" or full["status"] != "ok":
            sys.exit("bench-catchup: case %s is missing or wrong: no ratio" % case)
        same = ("cells", "digest")
        if [cu["target"][k] for k in same] != [full["target"][k] for k in same]:
            sys.exit("bench-catchup: case %s: the catch-up's target %s differs from the whole run's %s"
                     % (case, cu["target"], full["target"]))
        c = cu["catchup"]
        cases.append({
            "case": case, "what": label,
            # bytes_read: what the catch-up read of both snapshots' files
            # (data blocks of the touched rows, indexes); store_bytes_*: the
            # sizes of the store files it had to look into, and of those it
            # skipped whole.
            "catchup": {k: cu[k] for k in ("wall_s", "cpu_s", "peak_rss_kb", "bytes_read")} | {
                "store_bytes_read": c["store_bytes_read"], "store_bytes_skipped": c["store_bytes_skipped"],
                "store_files_read": c["store_files_read"], "store_files_skipped": c["store_files_skipped"],
                "rows_touched": c["rows_touched"], "cells_added": c["cells_added"],
                "cells_removed": c["cells_removed"], "cells_replaced": c["cells_replaced"]},
            "full_run": {k: full[k] for k in ("wall_s", "cpu_s", "peak_rss_kb", "bytes_read", "cells_read")},
            "target_cells": full["target"]["cells"],
            "full_over_catchup_wall": round(full["wall_s"] / cu["wall_s"], 2),
            "full_over_catchup_cpu": round(full["cpu_s"] / max(cu["cpu_s"], 0.01), 2),
            "catchup_bytes_over_full": round(cu["bytes_read"] / max(full["bytes_read"] or 1, 1), 4),
        })
    doc = {"bench": "catchup", "date": bench_meta.now(), "size": size, "share_changed": float(share),
           "changes": json.load(open(touched_path)),
           "method": "one rekey binary, puts sink, 2 workers, batch 1000, whole processes under /usr/bin/time, "
                     "each started on a quiet cluster; every target's digest equals the re-keyed snapshot's "
                     "(oracle digest-table against digest-snapshot --rekey) before a time counts",
           "cases": cases, "setup": rows.get("setup-full-a"),
           "machine": bench_meta.machine(), "versions": bench_meta.versions()}
    return doc


def main():
    if sys.argv[1] == "--summary":
        print(json.dumps(summary(*sys.argv[2:6]), indent=1))
    else:
        print(json.dumps(row(*sys.argv[1:9])))


if __name__ == "__main__":
    main()
