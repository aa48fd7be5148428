#!/usr/bin/env bash
# The Bigtable row of `make bench` (issue 52): the same re-key job written
# into gcloud's Bigtable emulator by rekey and by Google's Java
# HBase-compatible client, side by side.
#
#   java    the oracle's put contender (TableSnapshotScanner -> the wide ->
#           bucketed re-key -> one Put per cell) with its HBase connection
#           replaced by bigtable-hbase-2.x's (BufferedMutator; Maven
#           Central; testenv/bigtable), `oracle bench-e2e-bigtable`
#   rekey   `rekey run` of configs/wide_to_bucketed.yaml with
#           `sink: {type: bigtable}`
#
# Both read the same snapshot (exported to a local dir, so no HDFS
# DataNode shares the cores while they run), re-key by the same rule and
# send BATCH cells per MutateRows request, at most two requests
# outstanding: Java has one reading thread and its BufferedMutator's
# in-flight requests capped at 2 (the client refuses 1: its flow control
# must admit more cells than one request holds), rekey 2 workers, each
# waiting for its request. Both are pinned to core 0, the emulator to
# core 1. `rekey-1w` (1 worker, one request outstanding) runs beside them
# as a third side, for rekey's cost without the second worker. Each side first runs once
# untimed (warm-up: page cache, the emulator's allocations); then ROUNDS
# rounds, the order alternating. Every run writes into a fresh table made
# before its timer starts and dropped after it has been judged: its cells
# are counted and digested with Google's client (`oracle bigtable-table
# digest`, neither contender's code) and must equal the digest of the
# re-keyed snapshot (`oracle digest-snapshot --rekey`) before its time
# counts.
#
# The emulator keeps everything in memory and has none of a real
# instance's replication, persistence or nodes: its figures compare the
# two clients' costs on one machine and say nothing about what a real
# instance sustains (docs/bigtable.md, Sizing).
#
#   BT_SENSORS, BT_READINGS, BT_HEAVY   dataset (default 1500 x 100 x 2
#                                       versions, plus one sensor of 100,000
#                                       readings: about 500k cells, the
#                                       emulator holding them in memory)
#   BATCH        cells per request (default 1000, as the put rows)
#   ROUNDS       timed rounds (default 3)
#   BENCH_DIR    scratch (default /tmp/rekey-bench-bigtable)
#   BT_RESULTS   the row as JSON (default bench/results/bigtable.json)
#   MERGE_INTO   also add the row, as "bigtable", to this results JSON
#                (scripts/bench.sh passes its parts.json)
#   CBTEMULATOR  the emulator's binary (default: cbtemulator on PATH, else
#                gcloud's /usr/lib/google-cloud-sdk/platform/bigtable-emulator/)
#
# Without a cbtemulator the row is skipped with a message and exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."

# CBTEMULATOR names the emulator's binary; without it, cbtemulator on
# PATH, else where gcloud installs it.
emulator="${CBTEMULATOR:-$(command -v cbtemulator || true)}"
[ -n "$emulator" ] || emulator=/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator
if ! [ -x "$emulator" ]; then
	echo "bench: Bigtable row SKIPPED: CBTEMULATOR NOT FOUND (none on PATH, nor at $emulator); install it with \`gcloud components install bigtable\` or Debian's google-cloud-cli-bigtable-emulator, or name it in CBTEMULATOR"
	exit 0
fi

BT_SENSORS="${BT_SENSORS:-1500}"
BT_READINGS="${BT_READINGS:-100}"
BT_HEAVY="${BT_HEAVY:-100000}"
BATCH="${BATCH:-1000}"
ROUNDS="${ROUNDS:-3}"
BENCH_DIR="${BENCH_DIR:-/tmp/rekey-bench-bigtable}"
BT_RESULTS="${BT_RESULTS:-bench/results/bigtable.json}"
MERGE_INTO="${MERGE_INTO:-}"
PROJECT=bench INSTANCE=bench
rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR" "$(dirname "$BT_RESULTS")"
runs="$BENCH_DIR/runs.jsonl"
: >"$runs"
load_before="$(cat /proc/loadavg)"

[ -x bin/rekey ] || make -s build
testenv/bin/build
# Google's client lives in its own module and class loader (see
# testenv/bigtable/pom.xml); built here, outside every timer.
REKEY_BIGTABLE_CP="$(testenv/bigtable/bin/build)"
export REKEY_BIGTABLE_CP
export TESTENV_NO_BUILD=1

started=0
emu_pid=""
cleanup() {
	if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null || true; fi
	if [ "$started" = 1 ]; then testenv/bin/down || true; fi
}
trap cleanup EXIT
# The cluster only seeds the snapshot; the sides read its local copy.
if ! testenv/bin/status >/dev/null 2>&1; then
	testenv/bin/up
	started=1
fi

pin_side=() pin_emu=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
	pin_side=(taskset -c 0) pin_emu=(taskset -c 1)
fi

# The dataset: the end-to-end bench's wide layout (row = sensor, qualifier
# = 8-byte reading time), FAST_DIFF + SNAPPY, 2 versions, a delete on every
# 50th sensor in a newer HFile than the cells it masks, 4 regions.
SNAP=bench_bt
splits="$(printf '"s%06d", "s%06d", "s%06d"' $((BT_SENSORS / 4)) $((BT_SENSORS / 2)) $((BT_SENSORS * 3 / 4)))"
cat >"$BENCH_DIR/source.spec.json" <<JSON
{"table": "bench_bt_src", "seed": 52,
 "families": [{"name": "d", "encoding": "FAST_DIFF", "compression": "SNAPPY", "versions": 3}],
 "split_keys": [$splits],
 "steps": [
  {"op": "readings", "sensors": $BT_SENSORS, "readings": $BT_READINGS, "versions": 2, "value_min": 4, "value_max": 16,
   "heavy": [{"index": 7, "readings": $BT_HEAVY}], "deletes": 50, "flush_before_deletes": true},
  {"op": "flush"},
  {"op": "snapshot", "name": "$SNAP"}]}
JSON
echo "== seeding $SNAP ($BT_SENSORS sensors x $BT_READINGS readings x 2 versions, one of $BT_HEAVY readings) and exporting it"
testenv/bin/oracle drop-table bench_bt_src >/dev/null 2>&1 || true
testenv/bin/oracle delete-snapshot "$SNAP" >/dev/null 2>&1 || true
testenv/bin/oracle seed "$BENCH_DIR/source.spec.json" >/dev/null
testenv/bin/oracle export-snapshot "$SNAP" "$BENCH_DIR/snap" >/dev/null
testenv/bin/oracle drop-table bench_bt_src >/dev/null
# A cluster this script started is not needed past here: stopped, it
# takes no share of the cores while the sides are timed.
if [ "$started" = 1 ]; then
	testenv/bin/down >/dev/null
	started=0
fi
root="file://$BENCH_DIR/snap"
testenv/bin/oracle digest-snapshot "$root" "$SNAP" --rekey >"$BENCH_DIR/expected.json"
echo "   expected in Bigtable: $(cat "$BENCH_DIR/expected.json")"

# The emulator: a separate process on a loopback port, pinned apart.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"${pin_emu[@]}" "$emulator" -host 127.0.0.1 -port "$port" >"$BENCH_DIR/emulator.log" 2>&1 &
emu_pid=$!
export BIGTABLE_EMULATOR_HOST="127.0.0.1:$port"
for ((i = 0; i < 100; i++)); do
	if python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null; then break; fi
	sleep 0.1
done
echo "   cbtemulator $emulator on $BIGTABLE_EMULATOR_HOST (pid $emu_pid)"

# emu_cpu prints the emulator's CPU seconds (user+system) so far.
emu_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$emu_pid/stat"
}

# side_cmd SIDE TABLE: sets cmd to one contender writing the snapshot
# into TABLE (rekey's job file written first, outside the timer).
side_cmd() {
	case "$1" in
	java) cmd=("${pin_side[@]}" testenv/bin/oracle bench-e2e-bigtable "$root" "$SNAP" "$PROJECT" "$INSTANCE" "$2" "$BATCH" 2) ;;
	rekey | rekey-1w)
		local workers=2
		[ "$1" = rekey ] || workers=1
		local job="$BENCH_DIR/$2.yaml"
		sed -e "s|^  root: .*|  root: $BENCH_DIR/snap|" -e "s|^  name: .*|  name: $SNAP|" \
			-e "s|^  table: .*|  table: $2\n  bigtable: {project: $PROJECT, instance: $INSTANCE}|" \
			-e "s|^bad_keys: .*|bad_keys: {action: fail}|" configs/wide_to_bucketed.yaml >"$job"
		echo "sink: {type: bigtable}" >>"$job"
		cmd=("${pin_side[@]}" bin/rekey run "$job" --workers "$workers" --batch-cells "$BATCH" --fresh --progress none --json
			--checkpoint "$BENCH_DIR/$2.rekey/checkpoint.json")
		;;
	esac
}

# one SIDE ROUND: a fresh table, the side timed (whole process, and the
# emulator's CPU over it), the table judged, then dropped.
one() {
	local side="$1" r="$2" t="bench_bt_${1//-/_}_$2"
	local out="$BENCH_DIR/$side.$r.out" err="$BENCH_DIR/$side.$r.err" tm="$BENCH_DIR/$side.$r.time"
	testenv/bin/oracle bigtable-table create "$PROJECT" "$INSTANCE" "$t" d >/dev/null 2>"$BENCH_DIR/create.err"
	local e0 e1 status=ok cmd
	side_cmd "$side" "$t"
	e0="$(emu_cpu)"
	if ! /usr/bin/time -f '%e %U %S %M' -o "$tm" "${cmd[@]}" >"$out" 2>"$err"; then
		status=failed
		echo "   $side: FAILED (tail of $err):" >&2
		tail -n 15 "$err" >&2
	fi
	e1="$(emu_cpu)"
	local got=null line
	line="$(grep '^{' "$out" | tail -n 1 || true)"
	[ -n "$line" ] || line=null
	if [ "$status" = ok ]; then
		got="$(testenv/bin/oracle bigtable-table digest "$PROJECT" "$INSTANCE" "$t" 2>"$BENCH_DIR/digest.err")"
		if ! python3 scripts/e2e_target_ok.py "$BENCH_DIR/expected.json" "$got"; then status=wrong; fi
	fi
	testenv/bin/oracle bigtable-table drop "$PROJECT" "$INSTANCE" "$t" >/dev/null 2>&1
	local wall user sys rss
	read -r wall user sys rss < <(tail -n 1 "$tm") || true
	printf '{"side":"%s","round":%d,"status":"%s","wall_s":%s,"cpu_s":%s,"peak_rss_kb":%s,"emulator_cpu_s":%s,"target":%s,"result":%s}\n' \
		"$side" "$r" "$status" "${wall:-null}" "$(python3 -c "print(round(${user:-0}+${sys:-0},3))")" "${rss:-null}" \
		"$(awk -v a="$e0" -v b="$e1" 'BEGIN{printf "%.3f", b - a}')" "$got" "$line" >>"$runs"
	echo "   $side: $status, ${wall:-?} s wall, $(python3 -c "print(round(${user:-0}+${sys:-0},2))") s CPU, emulator $(awk -v a="$e0" -v b="$e1" 'BEGIN{printf "%.2f", b - a}') s CPU"
}

echo "== Bigtable: $BATCH cells per request, at most 2 outstanding, sides on core 0, emulator on core 1"
sides=(java rekey rekey-1w)
echo "-- warm-up (untimed)"
for s in "${sides[@]}"; do one "$s" 0; done
for ((r = 1; r <= ROUNDS; r++)); do
	echo "-- round $r of $ROUNDS"
	# The order rotates, so no side always follows the same one.
	for ((k = 0; k < ${#sides[@]}; k++)); do one "${sides[$(((k + r - 1) % ${#sides[@]}))]}" "$r"; done
done
load_after="$(cat /proc/loadavg)"

python3 scripts/bench_bigtable.py "$runs" "$BT_RESULTS" "$ROUNDS" "$BATCH" "$BENCH_DIR/expected.json" \
	"$emulator" "$load_before" "$load_after" "$MERGE_INTO"
echo "raw measurements: $runs"
