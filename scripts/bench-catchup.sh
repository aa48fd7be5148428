#!/usr/bin/env bash
# The catch-up bench (issue 53): what `rekey run JOB --since A` costs
# against a whole run of the same snapshot, on the e2e bench's readings
# table (scripts/bench-e2e.sh's dataset and its wide -> bucketed preset).
#
#   1. seed the table, flush, snapshot A; a whole run A -> target T
#      (setup, not timed against anything);
#   2. the day's changes by HBase's client on 1% of the sensors (oracle
#      touch-readings: newer versions past VERSIONS, a new reading, a
#      column and a newest version deleted), a flush, no compaction,
#      snapshot B;
#      - timed: the catch-up A -> B into T, and a whole run of B into a
#        fresh target;
#   3. a major compaction of the table, snapshot C (the same cells as B in
#      new files, so every row must be read again);
#      - timed: the catch-up B -> C into T, and a whole run of C into a
#        fresh target.
# Every target is checked before its time counts: the oracle's digest of
# the table (cells and an order-independent digest) must equal the digest
# of the re-keyed snapshot. Both contenders are the same rekey binary,
# puts sink, 2 workers, the same batch, each started on a quiet cluster.
#
#   SIZE=small|default|large   dataset, as bench-e2e (default large)
#   SHARE=0.01                 share of sensors changed
#   BENCH_DIR                  scratch (default /tmp/rekey-bench-catchup)
#   RESULTS                    output JSON (default bench/results/catchup-SIZE.json)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE="${SIZE:-large}"
SHARE="${SHARE:-0.01}"
BATCH="${BATCH:-1000}"
BENCH_DIR="${BENCH_DIR:-/tmp/rekey-bench-catchup}"
RESULTS="${RESULTS:-bench/results/catchup-$SIZE.json}"
case "$SIZE" in
small) sensors=400 readings=100 regions=4 heavy='[{"index": 7, "readings": 50000}]' ;;
default) sensors=2000 readings=150 regions=6 heavy='[{"index": 7, "readings": 500000}, {"index": 1003, "readings": 100000}, {"index": 1777, "readings": 50000}]' ;;
large) sensors=10000 readings=200 regions=8 heavy='[{"index": 7, "readings": 2500000}, {"index": 4003, "readings": 500000}, {"index": 8777, "readings": 500000}]' ;;
*)
	echo "bench-catchup: SIZE must be small, default or large" >&2
	exit 2
	;;
esac
rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR" "$(dirname "$RESULTS")"
rows="$BENCH_DIR/rows.jsonl"
: >"$rows"

testenv/bin/build
started=0
SRC=bench_cu_src
SNAPS=("bench_cu_${SIZE}_a" "bench_cu_${SIZE}_b" "bench_cu_${SIZE}_c")
TARGETS=(bench_cu_t bench_cu_full_b bench_cu_full_c)
cleanup() {
	testenv/bin/oracle delete-snapshot "${SNAPS[@]}" >/dev/null 2>&1 || true
	testenv/bin/oracle drop-table "$SRC" "${TARGETS[@]}" >/dev/null 2>&1 || true
	if [ "$started" = 1 ]; then testenv/bin/down || true; fi
}
trap cleanup EXIT
if ! testenv/bin/status >/dev/null 2>&1; then
	testenv/bin/up
	started=1
fi
. testenv/bin/lib.sh
zk="$(state_get zookeeper_quorum)"
rootdir="$(state_get hbase_rootdir)"
. scripts/bench_lib.sh
[ -x bin/rekey ] || make -s build
export TESTENV_NO_BUILD=1

splits=""
for ((i = 1; i < regions; i++)); do
	splits+="${splits:+, }\"$(printf 's%06d' $((sensors * i / regions)))\""
done
family='{"name": "d", "encoding": "FAST_DIFF", "compression": "SNAPPY", "versions": 3}'
new_target() {
	testenv/bin/oracle drop-table "$1" >/dev/null
	printf '{"table": "%s", "families": [%s], "split_keys": [%s], "steps": []}\n' "$1" "$family" "$splits" >"$BENCH_DIR/$1.spec.json"
	testenv/bin/oracle seed "$BENCH_DIR/$1.spec.json" >/dev/null
}

echo "== seeding $SRC ($SIZE: $sensors sensors x $readings readings x 2 versions, heavy $heavy, $regions regions)"
testenv/bin/oracle delete-snapshot "${SNAPS[@]}" >/dev/null 2>&1 || true
cat >"$BENCH_DIR/source.spec.json" <<JSON
{"table": "$SRC", "seed": 15, "families": [$family], "split_keys": [$splits],
 "steps": [
  {"op": "readings", "sensors": $sensors, "readings": $readings, "versions": 2, "value_min": 4, "value_max": 16,
   "heavy": $heavy, "deletes": 50, "flush_before_deletes": true},
  {"op": "flush"},
  {"op": "snapshot", "name": "${SNAPS[0]}"}]}
JSON
testenv/bin/oracle seed "$BENCH_DIR/source.spec.json"

# job SNAPSHOT TABLE: the shipped preset pointed at SNAPSHOT and TABLE.
job() {
	sed -e "s|^  root: .*|  root: $rootdir|" -e "s|^  name: .*|  name: $1|" \
		-e "s|^  table: .*|  table: $2|" -e "s|^bad_keys: .*|bad_keys: {action: fail}|" \
		configs/wide_to_bucketed.yaml >"$BENCH_DIR/$2-$1.yaml"
	echo "$BENCH_DIR/$2-$1.yaml"
}

# timed NAME SNAPSHOT TABLE ARGS...: `rekey run` of SNAPSHOT into TABLE,
# whole process under /usr/bin/time, then the target checked against the
# re-keyed snapshot; appends a row to rows.jsonl.
timed() {
	local name="$1" snap="$2" table="$3"
	shift 3
	local j out="$BENCH_DIR/$name.out" tm="$BENCH_DIR/$name.time"
	j="$(job "$snap" "$table")"
	settle
	if ! /usr/bin/time -f '%e %U %S %M' -o "$tm" bin/rekey run "$j" --sink puts --batch-cells "$BATCH" --workers 2 \
		--zk "$zk" --progress none --json "$@" >"$out" 2>"$BENCH_DIR/$name.err"; then
		echo "bench-catchup: $name failed (tail of its stderr):" >&2
		tail -n 15 "$BENCH_DIR/$name.err" >&2
		exit 1
	fi
	testenv/bin/oracle digest-snapshot "$rootdir" "$snap" --rekey >"$BENCH_DIR/expected-$snap.json"
	local got
	got="$(testenv/bin/oracle digest-table "$table")"
	local status=ok
	python3 scripts/e2e_target_ok.py "$BENCH_DIR/expected-$snap.json" "$got" || status=wrong
	read -r wall user sys rss < <(tail -n 1 "$tm")
	python3 scripts/bench_catchup_row.py "$name" "$status" "$out" "$wall" "$user" "$sys" "$rss" "$got" >>"$rows"
	echo "   $(tail -n 1 "$rows")"
	if [ "$status" != ok ]; then
		echo "bench-catchup: $name left $table unlike the re-keyed $snap: no time counts" >&2
		exit 1
	fi
}

state="$BENCH_DIR/state/checkpoint.json"
echo "== setup: a whole run of ${SNAPS[0]} into ${TARGETS[0]}"
new_target "${TARGETS[0]}"
timed setup-full-a "${SNAPS[0]}" "${TARGETS[0]}" --checkpoint "$state"

echo "== the day's changes on $SHARE of the sensors, a flush, ${SNAPS[1]}"
testenv/bin/oracle touch-readings "$SRC" d "$sensors" 's%06d' "$SHARE" 53 | tee "$BENCH_DIR/touched.json"
testenv/bin/oracle flush "$SRC" >/dev/null
testenv/bin/oracle snapshot "$SRC" "${SNAPS[1]}" >/dev/null
timed catchup-flushed "${SNAPS[1]}" "${TARGETS[0]}" --checkpoint "$state" --since "${SNAPS[0]}"
new_target "${TARGETS[1]}"
timed full-flushed "${SNAPS[1]}" "${TARGETS[1]}" --checkpoint "$BENCH_DIR/full-b/checkpoint.json"

echo "== a major compaction, ${SNAPS[2]}"
testenv/bin/oracle major-compact "$SRC" >/dev/null
testenv/bin/oracle snapshot "$SRC" "${SNAPS[2]}" >/dev/null
timed catchup-compacted "${SNAPS[2]}" "${TARGETS[0]}" --checkpoint "$state" --since "${SNAPS[1]}"
new_target "${TARGETS[2]}"
timed full-compacted "${SNAPS[2]}" "${TARGETS[2]}" --checkpoint "$BENCH_DIR/full-c/checkpoint.json"

python3 scripts/bench_catchup_row.py --summary "$rows" "$SIZE" "$SHARE" "$BENCH_DIR/touched.json" >"$RESULTS"
echo "== $RESULTS"
cat "$RESULTS"
