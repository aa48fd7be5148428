"""The end-to-end bench as a chart (scripts/bench-e2e.sh runs it after
e2e_summary.py; docs/performance.md and the README show the result).

    e2e_chart.py [RESULTS [OUT]]

Reads RESULTS (default bench/results/latest.json, e2e_summary.py's record)
and writes OUT (default docs/e2e.svg): for each contender of the summary, in
its order, the median wall seconds and the median CPU seconds of its ok
rounds as two horizontal bars on one scale, each labelled with its value;
titled with the record's date and rekey commit, with the run's size (the
source's cells, the SIZE, the rounds) and machine under it. Every number
drawn is read from RESULTS; a contender with no ok round says so instead of
a bar. Hand-written SVG, standard library only, and the same record always
gives the same bytes.
"""
import json
import math
import sys
from xml.sax.saxutils import escape

# What each contender does, in words (bench-e2e.sh's header says how).
NAMES = {
    "rekey-put-1w": "rekey, puts, 1 worker",
    "rekey-put-2w": "rekey, puts, 2 workers",
    "rekey-hfile-1w": "rekey, staged HFiles, 1 worker",
    "rekey-hfile-2w": "rekey, staged HFiles, 2 workers",
    "java-put": "Java, puts",
    "java-hfile": "Java, HFiles + bulk load",
    "spark-hfile": "Spark, HFiles + bulk load",
    "spark-put": "Spark, puts",
}

WIDTH = 860
LEFT = 250          # where the bars start; the names stand left of it
RIGHT = 110         # room right of the longest bar for its label
TOP = 96            # below the title, the subtitle and the legend
ROW = 46            # one contender: two bars and the gap under them
BAR = 15
GAP = 3
FOOT = 58           # the axis labels and the note under the rows
WALL_COLOR = "#3b6ea5"
CPU_COLOR = "#e3a33b"
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


def seconds(v):
    """A number of seconds as the record holds it (11.13 -> '11.13 s')."""
    return f"{v:g} s"


def tick_step(top):
    """A round step (1, 2 or 5 times a power of ten) that cuts 0..top into
    at most eight parts."""
    step = 10 ** math.floor(math.log10(top / 8)) if top > 0 else 1
    for m in (1, 2, 5, 10):
        if top / (step * m) <= 8:
            return step * m
    return step * 10


def text(x, y, s, size=12, anchor="start", weight="normal", color="#222"):
    """One SVG text element."""
    return (f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{color}">{escape(s)}</text>')


def header(doc):
    """The title, the run's size and machine, and the legend."""
    versions, machine, source = doc.get("versions", {}), doc.get("machine", {}), doc["source"]
    title = f'rekey end to end: {doc["date"]}, rekey {versions.get("rekey_commit", "?")}'
    size = (f'{source["cells"]:,} cells of snapshot {source.get("snapshot", "?")} re-keyed '
            f'(SIZE={doc.get("size", "?")}); medians over the ok rounds of {doc.get("rounds", "?")}')
    box = ", ".join(p for p in (
        f'{machine["cpus"]} CPUs' if machine.get("cpus") else "",
        machine.get("cpu_model") or "",
        versions.get("java") or "",
        f'Spark {versions["spark"]}' if versions.get("spark") else "") if p)
    out = [text(16, 26, title, 16, weight="bold"), text(16, 46, size), text(16, 63, box, 11, color="#555")]
    for i, (label, color) in enumerate((("wall time", WALL_COLOR), ("CPU time (user + system)", CPU_COLOR))):
        x = LEFT + i * 120
        out.append(f'<rect x="{x}" y="74" width="12" height="12" fill="{color}"/>')
        out.append(text(x + 17, 84, label, 11))
    return out


def axis(top, scale, bottom, note="seconds, whole process as a user starts it (JVM start included)", first=TOP):
    """Vertical grid lines from the first row's y to under the rows, with
    their seconds, and note."""
    out = []
    step = tick_step(top)
    n = 0
    while n * step <= top + 1e-9:
        v = n * step
        x = LEFT + v * scale
        out.append(f'<line x1="{x:.1f}" y1="{first - 4}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>')
        out.append(text(f"{x:.1f}", bottom + 14, f"{v:g}", 10, "middle", color="#555"))
        n += 1
    out.append(text(LEFT, bottom + 30, note, 10, color="#555"))
    return out


def contender(s, y, scale):
    """One contender's name and its two bars (or why it has none)."""
    rekey = s["contender"].startswith("rekey-")
    name = NAMES.get(s["contender"], s["contender"])
    out = [text(LEFT - 10, y + BAR - 2, name, 12, "end", "bold" if rekey else "normal"),
           text(LEFT - 10, y + 2 * BAR + GAP - 2, f'{s["rounds_ok"]}/{s["rounds"]} rounds ok', 10, "end", color="#777")]
    if "wall_s" not in s:
        out.append(text(LEFT + 4, y + BAR - 2, "not measured: no round ran ok", 11, color="#a33"))
        return out
    return out + bars(y, scale, s["wall_s"], s["cpu_s"])


def bars(y, scale, wall, cpu):
    """A wall and a CPU bar from y down, each labelled with its seconds."""
    out = []
    for i, (v, what, color) in enumerate(((wall, "wall", WALL_COLOR), (cpu, "CPU", CPU_COLOR))):
        by = y + i * (BAR + GAP)
        w = v * scale
        out.append(f'<rect x="{LEFT}" y="{by}" width="{w:.1f}" height="{BAR}" fill="{color}"/>')
        out.append(text(f"{LEFT + w + 5:.1f}", by + BAR - 3, f"{seconds(v)} {what}", 11))
    return out


def chart(doc):
    """The whole SVG document for one e2e record."""
    rows = doc["summary"]
    values = [s[k] for s in rows for k in ("wall_s", "cpu_s") if k in s]
    top = max(values, default=1)
    step = tick_step(top)
    top = math.ceil(top / step) * step
    scale = (WIDTH - LEFT - RIGHT) / top
    bottom = TOP + ROW * len(rows)
    height = bottom + FOOT
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" {FONT}>',
           f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>']
    out += header(doc)
    out += axis(top, scale, bottom)
    for i, s in enumerate(rows):
        out += contender(s, TOP + i * ROW + 4, scale)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(draw=None, src="bench/results/latest.json", dst="docs/e2e.svg"):
    """Draws the record named by the first argument (default src) into the
    file named by the second (default dst) with draw (default chart)."""
    src = sys.argv[1] if len(sys.argv) > 1 else src
    dst = sys.argv[2] if len(sys.argv) > 2 else dst
    with open(src) as f:
        doc = json.load(f)
    with open(dst, "w") as f:
        f.write((draw or chart)(doc))
    print(f"chart of {src}: {dst}")


if __name__ == "__main__":
    main()
