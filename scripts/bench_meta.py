"""Machine and version facts written beside every bench result
(scripts/bench_parts.py and scripts/e2e_summary.py import it), so a figure
in bench/results/ always says where and with what it was measured; and the
one way those results are written."""
import datetime
import json
import os
import platform
import subprocess


def _sh(cmd):
    try:
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
        return out or None
    except Exception:
        return None


def now():
    """The current UTC time, ISO 8601, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def machine():
    """CPUs, CPU model, memory, kernel and the load average now."""
    model = None
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = int(next(l for l in open("/proc/meminfo") if l.startswith("MemTotal")).split()[1])
    return {"cpus": os.cpu_count(), "cpu_model": model, "mem_gib": round(mem_kb / 2**20, 1),
            "kernel": platform.release(), "load_avg_at_end": os.getloadavg()}


def versions():
    """Java, HBase, Spark and Go versions and rekey's commit."""
    return {"java": (_sh("java -version 2>&1 | head -1") or "").replace('"', ""),
            "hbase": "2.5.11-hadoop3", "spark": "3.5.6 (Scala 2.12, local[2])",
            "go": _sh("go env GOVERSION"), "rekey_commit": _sh("git rev-parse --short HEAD")}


def write_json(path, doc):
    """Writes doc to path as indented JSON, whole or not at all (a temporary
    file renamed over it), making path's directory if it is missing."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)
