#!/usr/bin/env bash
# make demo: the demo job on the bundled snapshot, with no cluster.
#
# configs/demo.yaml applies the wide -> bucketed preset to the snapshot
# bundled in testdata/snapshots/demo_events (written by a real HBase). The
# demo runs `rekey plan` (old keys beside their new keys, the heaviest
# users, the largest new row, suggested split keys, warnings), then the job
# itself with the staged-HFiles sink, offline: every cell read, re-keyed,
# partitioned by the planned target regions, sorted and written as HFiles
# under OUT (default ./demo-out) that a bulk load can adopt; then it reads
# the first new rows back from those HFiles and verifies them against the
# snapshot, entity by entity, writing OUT/report.html. Then it shows what a
# mistake in a job file looks like.
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

OUT="${OUT:-./demo-out}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rekey-demo-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== rekey plan configs/demo.yaml --sample 0   (the whole snapshot)"
"$bin" plan configs/demo.yaml --sample 0


echo
echo "== rekey run configs/demo.yaml --sink hfiles --offline --staging $OUT   (the job, no cluster)"
rm -rf "$OUT"
"$bin" run configs/demo.yaml --sink hfiles --offline --staging "$OUT" --fresh \
	--checkpoint "$OUT/state/checkpoint.json" --progress none

first=$(find "$OUT/hfiles" -type f | sort | head -1)
echo
echo "== rekey inspect hfile $first --cells-only   (its first 5 cells: row = user, 6 bytes | day start, 8-byte millis; qualifier = millis into the day)"
"$bin" inspect hfile "$first" --cells-only | sed -n 1,5p

echo
echo "== rekey verify configs/demo.yaml --staging $OUT   (the 10 heaviest users and a sample of 20, old snapshot against the staged HFiles)"
"$bin" verify configs/demo.yaml --staging "$OUT" --sketch "$OUT/state/entities.json" \
	--heaviest 10 --sample 20 --html "$OUT/report.html" --out "$OUT/report.json" | sed -n '1,14p;$p'
echo "(report: $OUT/report.html, $OUT/report.json)"

echo
echo "== the same job without the day bucket: plan warns that rows stay unbounded"
nobucket=$tmp/demo-nobucket.yaml
sed -e '/type: time_bucket/d' -e 's/{type: offset, of: ts, bucket: day}.*/{field: ts, type: int, width: 8}/' \
	-e 's|root: \.\./testdata|root: '"$PWD"'/testdata|' configs/demo.yaml >"$nobucket"
"$bin" plan "$nobucket" --sample 0 | sed -n '/^old rows/,$p'

echo
echo "== a job file with mistakes: rekey exits 2 and says where"
bad=$tmp/demo-mistakes.yaml
sed -e 's/width: 6}/width: 7, sep: "|"}/' -e 's/unit: day/unit: week/' configs/demo.yaml >"$bad"
set +e
"$bin" plan "$bad"
code=$?
set -e
echo "(exit status $code)"
[ "$code" = 2 ]
