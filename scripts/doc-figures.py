#!/usr/bin/env python3
"""The figures docs/scale.md, docs/engines.md and README.md quote, computed
from the committed bench results (standard library only).

    python3 scripts/doc-figures.py [RESULTS_DIR]

RESULTS_DIR defaults to bench/results beside this script. Nothing is run
or measured here: every figure is read from a committed JSON file (named
beside it, with the field, the date and the machine), or is arithmetic on
those figures and on the assumptions of the worked example in
docs/scale.md (printed as such). After a new `make bench`, run this and
copy its figures into the pages.
"""

import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "bench", "results")

# The worked example's assumptions (docs/scale.md, "Worked example").
S = 50e12          # stored bytes of the snapshot
R_RATIO = 3        # KeyValue bytes per stored byte
REGIONS = 20_000   # source regions; the target is pre-split the same, one family
P = 20_000         # target partitions
HOURS = 8          # wall time wanted
CORES_PER_SLOT = 4
SLOTS_PER_HOST = 4
N_SHARDS = 1_000
R_PARTS = 500
GIB = 1 << 30
READS_PER_S = 100_000  # cluster-wide random reads per second (assumed)
REPLICATION = 3


def load(name):
    with open(os.path.join(RESULTS, name)) as f:
        return json.load(f)


def where(d, name):
    m = d.get("machine", {})
    return "%s: %s, %s-core %s, commit %s" % (
        name, d.get("date", "?"), m.get("cpus", "?"), m.get("cpu_model", "?"),
        d.get("versions", {}).get("rekey_commit", "?"))


def contender(d, name):
    for c in d["summary"]:
        if c["contender"] == name:
            return c
    raise SystemExit("%s: no contender %s" % (d.get("date"), name))


def part(d, label):
    for r in d["rows"]:
        if r["label"] == label:
            return r["rekey"]
    raise SystemExit("parts.json: no row %r" % label)


def n(x):
    return "{:,}".format(int(round(x)))


def sci(x, digits=3):
    e = int(math.floor(math.log10(abs(x))))
    return "%.*f x 10^%d" % (digits - 1, x / 10 ** e, e)


def main():
    latest = load("latest.json")
    parts = load("parts.json")
    sizes = load("sizes.json")
    later = load("sizes-e2e-default.json")

    print("Sources")
    print("  " + where(latest, "latest.json") + " (" + latest["versions"]["hbase"] + " mini cluster on the same cores)")
    print("  " + where(parts, "parts.json"))
    print("  " + where(later, "sizes-e2e-default.json") + ", %d round(s)" % later["rounds"])
    print()

    cells = latest["source"]["cells"]
    h1 = contender(latest, "rekey-hfile-1w")
    h2 = contender(latest, "rekey-hfile-2w")
    p1 = contender(latest, "rekey-put-1w")
    p2 = contender(latest, "rekey-put-2w")
    b_bench = h1["mb_per_sec"] * 1e6 / h1["cells_per_sec"]
    hfile_cpu_rate = cells / h1["cpu_s"]
    put_cpu_rate = cells / p1["cpu_s"]
    snap = part(parts, "read-snapshot")
    wr = part(parts, "write-hfile FAST_DIFF+SNAPPY")

    print("docs/scale.md, The measured rates")
    print("  cells (latest.json source.cells): %s" % n(cells))
    print("  bytes per cell: rekey-hfile-1w mb_per_sec %.2f / cells_per_sec %s = %.1f bytes"
          % (h1["mb_per_sec"], n(h1["cells_per_sec"]), b_bench))
    print("  whole hfiles path, CPU: %s cells / rekey-hfile-1w cpu_s %.2f = %s cells per CPU-second (%.1f MB/CPU-s)"
          % (n(cells), h1["cpu_s"], n(hfile_cpu_rate), hfile_cpu_rate * b_bench / 1e6))
    print("  whole hfiles path, wall, 2 workers: rekey-hfile-2w cells_per_sec %s cells/s (wall_s %.2f)"
          % (n(h2["cells_per_sec"]), h2["wall_s"]))
    print("  puts path, CPU in rekey: %s cells / rekey-put-1w cpu_s %.2f = %s cells per CPU-second"
          % (n(cells), p1["cpu_s"], n(put_cpu_rate)))
    print("  snapshot read alone, 1 worker: parts.json rows 'read-snapshot' rekey.cells_per_sec %s cells/s (%s cells)"
          % (n(snap["cells_per_sec"]), n(snap["cells"])))
    print("  HFile write alone, FAST_DIFF+SNAPPY: parts.json rows 'write-hfile FAST_DIFF+SNAPPY' rekey.cells_per_sec %s cells/s"
          % n(wr["cells_per_sec"]))
    print("  peak RSS, 1 GiB budget: rekey-hfile-1w peak_rss_mb %d MB, rekey-hfile-2w %d MB"
          % (h1["peak_rss_mb"], h2["peak_rss_mb"]))
    budgets = sorted({r["result"]["memory_budget"]["total"] for r in latest["runs"]
                      if r["contender"].startswith("rekey-hfile")})
    print("  memory_budget.total of those runs: %s" % ", ".join(n(b) for b in budgets))
    # What the hfiles runs did: spilled runs, or wrote HFiles straight.
    runs = [r["result"]["sink_stats"] for r in latest["runs"]
            if r["contender"].startswith("rekey-hfile") and r["status"] == "ok"]
    peak = max(s["peak_memory"] for s in runs)
    print("  rekey-hfile runs' sink_stats: runs %s, direct_hfiles %s, peak_memory (sort buffers) up to %s bytes (%.1f MB)"
          % (sorted({s["runs"] for s in runs}), sorted({s.get("direct_hfiles") for s in runs}), n(peak), peak / 1e6))
    print("  their loads: regions_loaded %s, load_seconds %.2f to %.2f s"
          % (sorted({s["regions_loaded"] for s in runs}), min(s["load_seconds"] for s in runs),
             max(s["load_seconds"] for s in runs)))
    lh1 = contender(later, "rekey-hfile-1w")
    print("  for comparison, sizes-e2e-default.json rekey-hfile-1w: cpu_s %.2f, %s cells per CPU-second"
          % (lh1["cpu_s"], n(later["source"]["cells"] / lh1["cpu_s"])))
    print()

    b = round(b_bench)
    U = S * R_RATIO
    C = U / b
    cpu_s = C / hfile_cpu_rate
    cpu_h = cpu_s / 3600
    cores = cpu_h / HOURS
    slots = math.ceil(cores / CORES_PER_SLOT)
    hosts = math.ceil(slots / SLOTS_PER_HOST)
    read_bps = S / (HOURS * 3600)
    nic_hours = S * 8 / 10e9 / 3600
    shard_stored = S / N_SHARDS
    shard_cells = C / N_SHARDS
    shard_min = shard_cells / hfile_cpu_rate / CORES_PER_SLOT / 60
    waves = N_SHARDS / slots
    print("docs/scale.md, Worked example (assumed: S = 50 TB, r = %d, b = %d bytes, P = %s, %d hours)"
          % (R_RATIO, b, n(P), HOURS))
    print("  U = S x r = %d TB; C = U / b = %s cells" % (U / 1e12, sci(C)))
    print("  CPU: C / %s = %s CPU-s = %s CPU-hours" % (n(hfile_cpu_rate), sci(cpu_s), n(cpu_h)))
    print("  over %d hours: %.1f cores busy, %d slots of %d cores (%d cores)"
          % (HOURS, cores, slots, CORES_PER_SLOT, slots * CORES_PER_SLOT))
    print("  read: %.2f GB/s, %.1f Gb/s; one 10 Gb/s NIC needs %.1f hours"
          % (read_bps / 1e9, read_bps * 8 / 1e9, nic_hours))
    print("  hosts of %d slots: %d; snapshot read per host %s MB/s (%.2f Gb/s)"
          % (SLOTS_PER_HOST, hosts, n(read_bps / hosts / 1e6), read_bps / hosts * 8 / 1e9))
    print("  N = %s shards: %d source regions, %d GB stored, %s cells each; %.1f minutes on %d cores; %s / %d = %.1f waves"
          % (n(N_SHARDS), REGIONS // N_SHARDS, shard_stored / 1e9, sci(shard_cells, 2), shard_min,
             CORES_PER_SLOT, n(N_SHARDS), slots, waves))
    for mem_gib, workers in ((8, 4), (32, 2)):
        buf = mem_gib * GIB / (2 * workers)
        nruns = U / buf
        reads = nruns * P
        print("  --memory %dGiB --workers %d: buffer %.0f GiB, runs %s, merge reads %s of %.1f KB, %.1f hours at %s reads/s"
              % (mem_gib, workers, buf / GIB, n(nruns), sci(reads, 2), buf / P / 1e3,
                 reads / READS_PER_S / 3600, n(READS_PER_S)))
    print("  with 2 cores a task: %d slots of 2 cores for %d cores" % (math.ceil(cores / 2), math.ceil(cores / 2) * 2))
    buf32 = 32 * GIB / (2 * 2)  # --memory 32GiB --workers 2
    print("  R = %d parts: %d partitions, %d GB stored each; a partition's merge, two batches per run: %.1f GB"
          % (R_PARTS, P // R_PARTS, S / R_PARTS / 1e9, U / buf32 * 2 * (buf32 / P) / 1e9))
    runs_written = S * REPLICATION   # runs assumed to compress like the source: S bytes, 3 replicas
    runs_read = S
    hfiles_written = S * REPLICATION
    moved = S + runs_written + runs_read + hfiles_written
    print("  bytes through HDFS: %d + %d + %d + %d = %d TB; over %d hours %.1f GB/s"
          % (S / 1e12, runs_written / 1e12, runs_read / 1e12, hfiles_written / 1e12, moved / 1e12,
             HOURS, moved / (HOURS * 3600) / 1e9))
    print()

    print("README.md, Performance (sizes.json, make bench-sizes): rekey 2 workers, contender wall_s / rekey wall_s")
    for s in sizes["sizes"]:
        c = {x["contender"]: x for x in s["contenders"]}
        m = load("sizes-e2e-%s.json" % s["size"])["machine"]
        print("  %s (%s cells, %s, %s-core %s, commit %s): spark-hfile %.1fx, java-hfile %.1fx, java-put %.1fx"
              % (s["size"], n(s["cells"]), s["date"], m["cpus"], m["cpu_model"], s["rekey_commit"],
                 c["spark-hfile"]["wall_s"] / c["rekey-hfile-2w"]["wall_s"],
                 c["java-hfile"]["wall_s"] / c["rekey-hfile-2w"]["wall_s"],
                 c["java-put"]["wall_s"] / c["rekey-put-2w"]["wall_s"]))
    print("  latest.json (%s cells): spark-hfile %.1fx, java-hfile %.1fx, java-put %.1fx"
          % (n(cells), contender(latest, "spark-hfile")["wall_s"] / h2["wall_s"],
             contender(latest, "java-hfile")["wall_s"] / h2["wall_s"],
             contender(latest, "java-put")["wall_s"] / p2["wall_s"]))


if __name__ == "__main__":
    main()
