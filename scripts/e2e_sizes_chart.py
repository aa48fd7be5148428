"""The end-to-end bench at several sizes as a chart (scripts/bench-sizes.sh
runs it after e2e_sizes.py).

    e2e_sizes_chart.py [SIZES [OUT]]

Reads SIZES (default bench/results/sizes.json) and writes OUT (default
bench/results/sizes.svg): one group per size, in the record's order, and in
each group every contender with an ok round as two horizontal bars on one
scale, wall and CPU seconds per million cells, each labelled with its
value. Per million cells, so that how each contender's cost grows with the
work reads across the groups. Every number drawn is read from SIZES; the
same record always gives the same bytes. Standard library only; the look
is e2e_chart.py's.
"""
import math

import e2e_chart
from e2e_chart import BAR, CPU_COLOR, FONT, LEFT, NAMES, RIGHT, WALL_COLOR, WIDTH, axis, bars, text, tick_step

TOP = 80     # below the title and the legend
ROW = 40     # one contender: two bars and the gap under them
HEAD = 28    # a size's heading
FOOT = 44


def rows_of(size):
    """The contenders of a size that have figures."""
    return [r for r in size["contenders"] if "wall_s_per_m" in r]


def group(size, y, scale):
    """One size's heading and its contenders' bars; returns the SVG and the
    next group's y."""
    head = f'SIZE={size["size"]}: {size["cells"]:,} cells'
    if "staged_over_parts" in size:
        head += (f'; staged job {size["staged_us_per_cell"]:g} CPU us/cell, '
                 f'parts {size["parts_us_per_cell"]["sum"]:g} ({size["staged_over_parts"]:g}x)')
    out = [text(16, y + 16, head, 13, weight="bold")]
    y += HEAD
    for r in rows_of(size):
        rekey = r["contender"].startswith("rekey-")
        out.append(text(LEFT - 10, y + BAR - 2, NAMES.get(r["contender"], r["contender"]), 12, "end",
                        "bold" if rekey else "normal"))
        out += bars(y, scale, r["wall_s_per_m"], r["cpu_s_per_m"])
        y += ROW
    return out, y


def chart(doc):
    """The whole SVG document for one sizes record."""
    sizes = doc["sizes"]
    values = [r[k] for s in sizes for r in rows_of(s) for k in ("wall_s_per_m", "cpu_s_per_m")]
    top = max(values, default=1)
    step = tick_step(top)
    top = math.ceil(top / step) * step
    scale = (WIDTH - LEFT - RIGHT) / top
    bottom = TOP + sum(HEAD + ROW * len(rows_of(s)) for s in sizes)
    height = bottom + FOOT
    commits = sorted({s.get("rekey_commit") or "?" for s in sizes})
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" {FONT}>',
           f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>',
           text(16, 26, f'rekey end to end, cost per million cells, by size (rekey {", ".join(commits)})', 16, weight="bold")]
    for i, (label, color) in enumerate((("wall s per 1M cells", WALL_COLOR), ("CPU s per 1M cells (user + system)", CPU_COLOR))):
        x = LEFT + i * 160
        out.append(f'<rect x="{x}" y="48" width="12" height="12" fill="{color}"/>')
        out.append(text(x + 17, 58, label, 11))
    out += axis(top, scale, bottom, "seconds per million source cells, whole process as a user starts it", TOP)
    y = TOP
    for s in sizes:
        g, y = group(s, y, scale)
        out += g
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    e2e_chart.main(chart, "bench/results/sizes.json", "bench/results/sizes.svg")
