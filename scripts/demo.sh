#!/usr/bin/env bash
# make demo: shows what the demo job would write, with no cluster.
#
# configs/demo.yaml applies the wide -> bucketed preset to the snapshot
# bundled in testdata/snapshots/demo_events (written by a real HBase). Until
# `rekey run` exists, the demo runs `rekey plan`: old keys beside their new
# keys, the heaviest users, the largest new row, suggested split keys and
# the plan's warnings. Then it shows what a mistake in a job file looks like.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/rekey
if [ ! -x "$bin" ]; then
	go build -o "$bin" ./cmd/rekey
fi
if [ ! -d testdata/snapshots/demo_events/.hbase-snapshot/demo_events ]; then
	echo "demo: the demo snapshot testdata/snapshots/demo_events is missing" >&2
	exit 2
fi

echo "== rekey plan configs/demo.yaml --sample 0   (the whole snapshot)"
"$bin" plan configs/demo.yaml --sample 0

echo
echo "== a job file with mistakes: rekey exits 2 and says where"
bad=$(mktemp "${TMPDIR:-/tmp}/rekey-demo-XXXXXX.yaml")
trap 'rm -f "$bad"' EXIT
sed -e 's/width: 6}/width: 7, sep: "|"}/' -e 's/unit: day/unit: week/' configs/demo.yaml >"$bad"
set +e
"$bin" plan "$bad"
code=$?
set -e
echo "(exit status $code)"
[ "$code" = 2 ]
