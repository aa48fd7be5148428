"""Whether a contender wrote the expected target (scripts/bench-e2e.sh).

    e2e_target_ok.py EXPECTED GOT

EXPECTED is the file `oracle digest-snapshot --rekey` wrote (the re-keyed
snapshot's cells and order-independent digest); GOT is the JSON text
`oracle digest-table` printed for the target. Writes nothing; exits 0 when
both cells and digest are equal, 1 otherwise.
"""
import json
import sys


def main():
    want = json.load(open(sys.argv[1]))
    got = json.loads(sys.argv[2])
    sys.exit(0 if (got["cells"], got["digest"]) == (want["cells"], want["digest"]) else 1)


if __name__ == "__main__":
    main()
