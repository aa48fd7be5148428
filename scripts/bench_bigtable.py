"""The Bigtable row of `make bench` from its raw runs (scripts/bench-bigtable.sh).

    bench_bigtable.py RUNS OUT ROUNDS BATCH EXPECTED EMULATOR LOAD_BEFORE LOAD_AFTER [MERGE_INTO]

RUNS holds one JSON line per run (round 0 is the untimed warm-up). Each
side's figures are the medians of its timed rounds, all of which must have
written exactly the expected cells (count and digest): otherwise the row
says which runs were wrong and prints no ratio. Writes the row to OUT and,
given MERGE_INTO, adds it to that results JSON as "bigtable".
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys


def version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip() or None
    except OSError:
        return None


def side(runs, name, cells):
    timed = [r for r in runs if r["side"] == name and r["round"] > 0]
    wall = statistics.median(r["wall_s"] for r in timed)
    cpu = statistics.median(r["cpu_s"] for r in timed)
    return {
        "cells": cells,
        "wall_s": round(wall, 3),
        "cells_per_sec": round(cells / wall),
        "cpu_s": round(cpu, 3),
        "cpu_us_per_cell": round(cpu / cells * 1e6, 3),
        "emulator_cpu_s": round(statistics.median(r["emulator_cpu_s"] for r in timed), 3),
        "peak_rss_kb": max(r["peak_rss_kb"] for r in timed),
        # The side's own figure, from its result line: the time from its
        # start inside the process (after the JVM or binary started; for
        # Java the Bigtable client's start-up is in it) to the last cell
        # acknowledged.
        "in_process_cells_per_sec": round(statistics.median(r["result"]["cells_per_sec"] for r in timed)),
        "rounds": [dict({k: r[k] for k in ("round", "wall_s", "cpu_s", "emulator_cpu_s", "peak_rss_kb")},
                        in_process_s=r["result"]["seconds"]) for r in timed],
    }


def main():
    runs_path, out, rounds, batch, expected_path, emulator, load_before, load_after = sys.argv[1:9]
    merge_into = sys.argv[9] if len(sys.argv) > 9 else ""
    runs = [json.loads(l) for l in open(runs_path) if l.strip()]
    expected = json.load(open(expected_path))
    bad = [f'{r["side"]} round {r["round"]}: {r["status"]}' for r in runs if r["status"] != "ok"]
    row = {
        "bench": "bigtable",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rounds": int(rounds),
        "batch_cells": int(batch),
        "expected": expected,
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None),
            "kernel": platform.release(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
        },
        "versions": {
            "go": version(["go", "env", "GOVERSION"]),
            "bigtable_hbase": "com.google.cloud.bigtable:bigtable-hbase-2.x-shaded:2.15.5",
            "emulator": emulator,
            "emulator_package": version(["dpkg-query", "-W", "-f", "${Package} ${Version}", "google-cloud-cli-bigtable-emulator"]),
        },
        "notes": (
            "The emulator keeps everything in memory in one process: these figures compare the two "
            "clients' costs on one machine and say nothing about a real instance's throughput "
            "(docs/bigtable.md, Sizing). Both sides read the same local copy of the snapshot, re-key it "
            "by the wide -> bucketed rule, send batch_cells cells per MutateRows request with one request "
            "outstanding at most 2 (rekey: 2 workers, each waiting for its request; Java: one reading thread, "
            "BufferedMutator in-flight RPCs 2, the fewest its client accepts; rekey_1w: 1 worker, 1 outstanding), "
            "pinned to core 0 with the emulator on core 1; wall and CPU are the whole process's "
            "(/usr/bin/time, JVM start included), the median of the timed rounds after one untimed "
            "warm-up run of each side; cells/s = cells written / wall; emulator_cpu_s is the emulator's "
            "CPU over the run; ratio = rekey (2 workers) / java (above 1: rekey is faster or cheaper). Every table was "
            "counted and digested with Google's client and equal to the re-keyed snapshot before its time counted."
        ),
        "runs_wrong": bad,
    }
    # java -version writes to stderr.
    java_v = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    row["versions"]["java"] = java_v[0] if java_v else None
    if not bad:
        cells = expected["cells"]
        j, k, k1 = side(runs, "java", cells), side(runs, "rekey", cells), side(runs, "rekey-1w", cells)
        row["java"], row["rekey"], row["rekey_1w"] = j, k, k1
        row["ratio"] = {
            "cells_per_sec": round(k["cells_per_sec"] / j["cells_per_sec"], 2),
            "cpu": round(j["cpu_s"] / k["cpu_s"], 2),
            "in_process_cells_per_sec": round(k["in_process_cells_per_sec"] / j["in_process_cells_per_sec"], 2),
            "emulator_cpu": round(j["emulator_cpu_s"] / k["emulator_cpu_s"], 2),
        }
    with open(out, "w") as f:
        json.dump(row, f, indent=1)
        f.write("\n")
    if merge_into and os.path.exists(merge_into):
        whole = json.load(open(merge_into))
        whole["bigtable"] = row
        with open(merge_into, "w") as f:
            json.dump(whole, f, indent=1)
            f.write("\n")

    print(f"Bigtable (cbtemulator, in memory: says nothing about a real instance), {expected['cells']} cells, "
          f"{batch} cells per request, median of {rounds} rounds; load before {load_before.split()[0:3]}, after {load_after.split()[0:3]}")
    if bad:
        print("  NO RATIO: these runs did not write the expected cells: " + "; ".join(bad))
        return
    fmt = ("  {:<8} {:>8} cells/s  {:>7.2f} s wall  {:>7.2f} s CPU  {:>6.2f} CPU us/cell  emulator {:>6.2f} s CPU"
           "  (in process: {:>8} cells/s)")
    for name, s in (("java", j), ("rekey", k), ("rekey-1w", k1)):
        print(fmt.format(name, s["cells_per_sec"], s["wall_s"], s["cpu_s"], s["cpu_us_per_cell"], s["emulator_cpu_s"],
                         s["in_process_cells_per_sec"]))
    r = row["ratio"]
    print(f"  ratio rekey/java: {r['cells_per_sec']}x cells/s ({r['in_process_cells_per_sec']}x in process), "
          f"{r['cpu']}x less CPU, emulator {r['emulator_cpu']}x less CPU")


if __name__ == "__main__":
    main()
