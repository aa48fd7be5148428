"""The data of scripts/bench-synctable.sh, as canonical dump lines (row hex,
family, qualifier hex, timestamp, type, value hex), which the oracle's seed
and write-cells steps write with HBase's client.

    synctable_data.py source CUSTOMERS OUT
        a tall table: row = customer "c%05d" "|" order number, 5 to 60
        orders a customer, columns amount and status in family o, one
        version each, random values of 4 to 16 bytes (seeded: the same
        CUSTOMERS give the same cells)
    synctable_data.py plant SOURCE OUT PLANTED
        three differences for the target, each in its own customer and
        region: a Delete of one cell (missing in the target), a Put of
        another value at one cell's key (changed value), a Put of a row
        of a customer the source does not have (extra row: its customer
        is a real one's with "x" after it, so its range lies between two
        customers' and rekey verify --all finds it only on the new side);
        PLANTED (JSON) names each: its entity and dump line as rekey
        verify prints it
"""
import json
import random
import sys

TS_BASE = 1767225600000  # 2026-01-01T00:00:00Z


def line(row, qual, ts, typ, value):
    return "\t".join([row.hex(), "o", qual.hex(), str(ts), typ, value.hex()])


def source(customers, out):
    r = random.Random(54)
    with open(out, "w") as f:
        for c in range(customers):
            for o in range(5 + r.randint(0, 55)):
                row = b"c%05d|%d" % (c, 1000 + o)
                for q in (b"amount", b"status"):
                    f.write(line(row, q, TS_BASE + o * 1000, "Put", r.randbytes(r.randint(4, 16))) + "\n")


def plant(src, out, planted):
    cells = {}
    customers = []
    with open(src) as f:
        for l in f:
            row, fam, qual, ts, typ, val = l.rstrip("\n").split("\t")
            cust = bytes.fromhex(row).split(b"|")[0].decode()
            if not customers or customers[-1] != cust:
                customers.append(cust)
            if bytes.fromhex(qual) == b"status" and cust not in cells:
                cells[cust] = (bytes.fromhex(row), int(ts), bytes.fromhex(val))
    n = len(customers)
    gone, changed, near = (customers[n * k // 100] for k in (5, 50, 95))
    g, c, e = cells[gone], cells[changed], cells[near]
    extra_row = near.encode() + b"x|999999"
    lines = [line(g[0], b"status", g[1], "Delete", b""),
             line(c[0], b"status", c[1], "Put", b"planted value"),
             line(extra_row, b"amount", e[1], "Put", b"planted row")]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    doc = {
        "missing_cell": {"entity": "customer=" + gone, "class": "missing_in_new",
                         "old": line(g[0], b"status", g[1], "Put", g[2]), "new": ""},
        "changed_value": {"entity": "customer=" + changed, "class": "value_differs",
                          "old": line(c[0], b"status", c[1], "Put", c[2]), "new": lines[1]},
        "extra_row": {"entity": "customer=" + near + "x", "class": "extra_in_new", "old": "", "new": lines[2]},
    }
    with open(planted, "w") as f:
        json.dump(doc, f)


def main():
    if sys.argv[1] == "source":
        source(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "plant":
        plant(*sys.argv[2:5])
    else:
        sys.exit("usage: synctable_data.py source CUSTOMERS OUT | plant SOURCE OUT PLANTED")


if __name__ == "__main__":
    main()
