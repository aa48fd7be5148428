"""The end-to-end bench at several sizes, as cost per million cells
(scripts/bench-sizes.sh runs it).

    e2e_sizes.py OUT E2E_1 PARTS_1 [E2E_2 PARTS_2 ...]

Each E2E is an e2e_summary.py record of one SIZE, each PARTS the line
bench-sizes.sh measured on the same snapshot: the snapshot read
(benchtool read-snapshot, 1 worker: its CPU seconds over the timed pass),
the dry run (rekey run --sink dry-run, 1 worker: read and re-key, whole
process) and the HFile write (benchtool write-hfile, FAST_DIFF + SNAPPY,
one core: its rate and its whole process's CPU seconds). Prints, per size and contender, wall and CPU
seconds per million cells of the source (medians of the ok rounds, as the
record has them), and the staged job's (rekey-hfile-2w) CPU per cell
beside the sum of the parts' per cell:

    read     read-snapshot CPU seconds / its cells
    re-key   (dry-run CPU seconds - read CPU seconds) / cells
    write    write-hfile's process CPU seconds / its cells (its cells/s
             is wall time, which other work on a shared machine inflates)

Writes OUT (JSON) with every figure printed. Standard library only.
"""
import json
import sys

STAGED = "rekey-hfile-2w"


def per_million(v, cells):
    """Seconds per million cells."""
    return round(v / cells * 1e6, 3)


def parts_of(p, cells):
    """The parts' CPU microseconds per cell, and their sum."""
    read = p["read"]["cpu_seconds"] / p["read"]["cells"]
    rekey = max(p["dry_run"]["cpu_s"] - p["read"]["cpu_seconds"], 0) / cells
    write = p["write"]["process_cpu_s"] / p["write"]["cells"]
    us = {k: round(v * 1e6, 3) for k, v in (("read", read), ("rekey", rekey), ("write", write))}
    us["sum"] = round(sum(us.values()), 3)
    return us


def size_record(e2e, parts):
    """One size: each contender's cost per million cells, and the parts."""
    cells = e2e["source"]["cells"]
    rows = []
    for s in e2e["summary"]:
        row = {"contender": s["contender"], "rounds_ok": s["rounds_ok"], "rounds": s["rounds"]}
        if "wall_s" in s:
            row.update(wall_s=s["wall_s"], cpu_s=s["cpu_s"],
                       wall_s_per_m=per_million(s["wall_s"], cells), cpu_s_per_m=per_million(s["cpu_s"], cells))
        rows.append(row)
    rec = {"size": e2e.get("size"), "cells": cells, "date": e2e.get("date"),
           "rekey_commit": e2e.get("versions", {}).get("rekey_commit"), "contenders": rows,
           "parts_us_per_cell": parts_of(parts, cells)}
    staged = next((r for r in rows if r["contender"] == STAGED and "cpu_s" in r), None)
    if staged:
        job = round(staged["cpu_s"] / cells * 1e6, 3)
        rec["staged_us_per_cell"] = job
        rec["staged_over_parts"] = round(job / rec["parts_us_per_cell"]["sum"], 2)
    return rec


def main():
    out, files = sys.argv[1], sys.argv[2:]
    if not files or len(files) % 2:
        sys.exit("usage: e2e_sizes.py OUT E2E PARTS [E2E PARTS ...]")
    sizes = []
    for e2e_path, parts_path in zip(files[::2], files[1::2]):
        with open(e2e_path) as f:
            e2e = json.load(f)
        with open(parts_path) as f:
            parts = json.loads(f.read().strip().splitlines()[-1])
        sizes.append(size_record(e2e, parts))
    print(f'{"size":<8} {"contender":<16} {"cells":>11} {"wall s":>8} {"CPU s":>8} {"wall s/1M":>10} {"CPU s/1M":>9}')
    for s in sizes:
        for r in s["contenders"]:
            if "wall_s" not in r:
                print(f'{s["size"]:<8} {r["contender"]:<16} {s["cells"]:>11,} {"no ok round":>8}')
                continue
            print(f'{s["size"]:<8} {r["contender"]:<16} {s["cells"]:>11,} {r["wall_s"]:>8.2f} {r["cpu_s"]:>8.2f} '
                  f'{r["wall_s_per_m"]:>10.3f} {r["cpu_s_per_m"]:>9.3f}')
    print()
    print(f'{"size":<8} {"staged CPU us/cell":>18} {"read":>7} {"re-key":>7} {"write":>7} {"parts":>7} {"job/parts":>9}')
    for s in sizes:
        p = s["parts_us_per_cell"]
        job = s.get("staged_us_per_cell")
        ratio = s.get("staged_over_parts")
        print(f'{s["size"]:<8} {job if job is not None else "-":>18} {p["read"]:>7.3f} {p["rekey"]:>7.3f} {p["write"]:>7.3f} '
              f'{p["sum"]:>7.3f} {ratio if ratio is not None else "-":>9}')
    with open(out, "w") as f:
        json.dump({"bench": "e2e-sizes", "sizes": sizes}, f, indent=1)
        f.write("\n")
    print(f"results: {out}")


if __name__ == "__main__":
    main()
