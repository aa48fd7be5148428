"""One row of the end-to-end bench's verify.jsonl (scripts/bench-e2e.sh).

    e2e_verify_row.py REPORT MODE ROUND WALL USER SYS RSS

Reads REPORT, the JSON report `rekey verify --json` wrote, and the whole
process's figures GNU time gave (wall seconds, user and system CPU seconds,
peak RSS in KiB); prints one JSON line: the verify mode (sample or all),
the round, wall and CPU seconds, peak RSS, how the new side was read
("new_side": table, snapshot or staging), and the report's entities,
mismatches, cells compared and bytes read on each side.
"""
import json
import sys


def main():
    report, mode, rnd, wall, user, sys_s, rss = sys.argv[1:]
    r = json.load(open(report))
    s = r["summary"]
    print(json.dumps({"verify": mode, "round": int(rnd), "wall_s": float(wall),
                      "cpu_s": round(float(user) + float(sys_s), 2), "peak_rss_kb": int(rss),
                      "new_side": r.get("new_side"),
                      "entities": s["entities"], "mismatched": s["mismatched"], "cells_compared": s["cells_compared"],
                      "old_bytes_read": s["old_bytes_read"], "new_bytes_read": s["new_bytes_read"],
                      "old_bytes_total": s.get("old_bytes_total")}))


if __name__ == "__main__":
    main()
