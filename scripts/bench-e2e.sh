#!/usr/bin/env bash
# The end-to-end bench (issue 15): whole re-key jobs side by side on one
# snapshot in the mini cluster, each writing the wide -> bucketed re-key of
# configs/wide_to_bucketed.yaml into its own pre-split target table:
#
#   java-put     TableSnapshotScanner -> re-key -> BufferedMutator (oracle)
#   java-hfile   TableSnapshotScanner -> re-key -> sorted HFiles (HBase's
#                StoreFileWriter, per region and family) -> bulk load (oracle)
#   spark-hfile  Spark local[2]: TableSnapshotInputFormat -> re-key ->
#                HFileOutputFormat2 -> bulk load (testenv/bin/spark-job)
#   spark-put    the same -> BufferedMutator in foreachPartition
#   rekey-*      `rekey run` (puts and staged HFiles, 1 and 2 workers): see
#                run_rekey below
#
# Every target is checked against the expected cells before its time
# counts: the oracle's digest of the target (cells and an order-independent
# digest, `oracle digest-table`) must equal the digest of the re-keyed
# snapshot (`oracle digest-snapshot --rekey`). A wrong result is reported as
# wrong, never as a time. Speed is measured and printed, never asserted.
#
#   SIZE=small|default|large   dataset (small: a one-minute smoke; default:
#                              the whole bench in under 15 minutes on 2 cores)
#   ROUNDS=N                   rounds; each runs every contender once, the
#                              order rotating per round (default 3 small, 1 otherwise)
#   CONTENDERS="java-put ..."  which to run (default all that exist)
#   BATCH=1000                 cells per put batch, for every put contender
#   REUSE=1                    reuse the seeded snapshot of the same SIZE
#   REKEY_ARGS="--flag ..."    more `rekey run` flags for the rekey
#                              contenders, for A/B runs (never in a record)
#   BENCH_DIR                  scratch (default /tmp/rekey-bench-e2e)
#   RESULTS                    output JSON (default bench/results/latest.json)
#   CHART                      its chart, wall and CPU time per contender
#                              (default docs/e2e.svg for the default RESULTS,
#                              else RESULTS with .svg for .json)
#
# Times are of the whole process as a user starts it (JVM start included),
# from /usr/bin/time; each result line also has the contender's own
# in-process figures. Each contender, and each verify, starts once the
# cluster is quiet (scripts/bench_lib.sh's settle).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"

SIZE="${SIZE:-default}"
REKEY_ARGS="${REKEY_ARGS:-}"
if [ -n "$REKEY_ARGS" ]; then
	echo "bench-e2e: rekey contenders run with extra flags: $REKEY_ARGS (an A/B run, not the shipped defaults)"
fi
BATCH="${BATCH:-1000}"
BENCH_DIR="${BENCH_DIR:-/tmp/rekey-bench-e2e}"
RESULTS="${RESULTS:-bench/results/latest.json}"
# The docs show the chart of latest.json; another record keeps its own.
if [ "$RESULTS" = bench/results/latest.json ]; then
	CHART="${CHART:-docs/e2e.svg}"
else
	CHART="${CHART:-${RESULTS%.json}.svg}"
fi
case "$SIZE" in
small) ROUNDS="${ROUNDS:-3}" ;;
default | large) ROUNDS="${ROUNDS:-1}" ;;
*)
	echo "bench-e2e: SIZE must be small, default or large" >&2
	exit 2
	;;
esac
mkdir -p "$BENCH_DIR" "$(dirname "$RESULTS")"
runs="$BENCH_DIR/runs.jsonl"
: >"$runs"

testenv/bin/build
started=0
cleanup() { if [ "$started" = 1 ]; then testenv/bin/down || true; fi; }
trap cleanup EXIT
if ! testenv/bin/status >/dev/null 2>&1; then
	testenv/bin/up
	started=1
fi
. testenv/bin/lib.sh
zk="$(state_get zookeeper_quorum)"
rootdir="$(state_get hbase_rootdir)"
nn="$(state_get hdfs_namenode)"
. scripts/bench_lib.sh

SRC=bench_e2e_src
SNAP="bench_e2e_$SIZE"

# The dataset: the wide layout (row = sensor id, qualifier = 8-byte reading
# time), one family d, FAST_DIFF + SNAPPY, 2 versions per reading, a delete
# on every 50th sensor (in a newer HFile than the cells it masks), heavy
# sensors (the heaviest has 1M cells at SIZE=default), regions split at
# even sensor ids. Target tables get the same family and split keys.
case "$SIZE" in
small) sensors=400 readings=100 regions=4 heavy='[{"index": 7, "readings": 50000}]' ;;
default) sensors=2000 readings=150 regions=6 heavy='[{"index": 7, "readings": 500000}, {"index": 1003, "readings": 100000}, {"index": 1777, "readings": 50000}]' ;;
large) sensors=10000 readings=200 regions=8 heavy='[{"index": 7, "readings": 2500000}, {"index": 4003, "readings": 500000}, {"index": 8777, "readings": 500000}]' ;;
esac
splits=""
for ((i = 1; i < regions; i++)); do
	splits+="${splits:+, }\"$(printf 's%06d' $((sensors * i / regions)))\""
done
family='{"name": "d", "encoding": "FAST_DIFF", "compression": "SNAPPY", "versions": 3}'

# target_spec TABLE: a seed spec that only creates the pre-split target.
target_spec() {
	printf '{"table": "%s", "families": [%s], "split_keys": [%s], "steps": []}\n' "$1" "$family" "$splits"
}

have_snapshot() {
	testenv/bin/oracle digest-snapshot "$rootdir" "$SNAP" >"$BENCH_DIR/source.json" 2>/dev/null
}
if [ "${REUSE:-0}" = 1 ] && have_snapshot; then
	echo "== reusing snapshot $SNAP"
else
	echo "== seeding $SRC ($SIZE: $sensors sensors x $readings readings x 2 versions, heavy $heavy, $regions regions)"
	cat >"$BENCH_DIR/source.spec.json" <<JSON
{"table": "$SRC", "seed": 15, "families": [$family], "split_keys": [$splits],
 "steps": [
  {"op": "readings", "sensors": $sensors, "readings": $readings, "versions": 2, "value_min": 4, "value_max": 16,
   "heavy": $heavy, "deletes": 50, "flush_before_deletes": true},
  {"op": "flush"},
  {"op": "snapshot", "name": "$SNAP"}]}
JSON
	t0=$(date +%s)
	testenv/bin/oracle seed "$BENCH_DIR/source.spec.json"
	testenv/bin/oracle drop-table "$SRC" >/dev/null # the snapshot keeps the files
	have_snapshot
	echo "   seeded in $(($(date +%s) - t0)) s"
fi
echo "   source: $(cat "$BENCH_DIR/source.json")"
testenv/bin/oracle digest-snapshot "$rootdir" "$SNAP" --rekey >"$BENCH_DIR/expected.json"
echo "   expected target: $(cat "$BENCH_DIR/expected.json")"

# run_rekey CONTENDER TABLE: `rekey run` as the contender CONTENDER
# (rekey-put-1w, rekey-put-2w, rekey-hfile-1w or rekey-hfile-2w) into TABLE
# (already created, pre-split like the others); rekey's JSON result line
# comes last on stdout.
run_rekey() {
	local contender="$1" table="$2" job="$BENCH_DIR/$2.yaml"
	# The shipped preset, pointed at this snapshot and this target table.
	sed -e "s|^  root: .*|  root: $rootdir|" -e "s|^  name: .*|  name: $SNAP|" \
		-e "s|^  table: .*|  table: $table|" -e "s|^bad_keys: .*|bad_keys: {action: fail}|" \
		configs/wide_to_bucketed.yaml >"$job"
	local workers="${contender##*-}"
	workers="${workers%w}"
	# --fresh: each round starts over; the checkpoint lives in BENCH_DIR.
	local common=(--workers "$workers" --zk "$zk" --fresh --progress none --json
		--checkpoint "$BENCH_DIR/$table.rekey/checkpoint.json")
	case "$contender" in
	# shellcheck disable=SC2086 # REKEY_ARGS is a list of flags
	rekey-put-*) bin/rekey run "$job" --sink puts --batch-cells "$BATCH" "${common[@]}" ${REKEY_ARGS:-} ;;
	# shellcheck disable=SC2086
	rekey-hfile-*) bin/rekey run "$job" --sink hfiles --staging "hdfs://$nn/tmp/bench-e2e-stage-$table-$$-$RANDOM" "${common[@]}" ${REKEY_ARGS:-} ;;
	esac
}

# contender_cmd CONTENDER TABLE: runs one contender into TABLE.
contender_cmd() {
	local c="$1" t="$2"
	case "$c" in
	java-put) testenv/bin/oracle bench-e2e-put "$rootdir" "$SNAP" "$t" "$BATCH" ;;
	java-hfile) testenv/bin/oracle bench-e2e-hfile "$rootdir" "$SNAP" "$t" "hdfs://$nn/tmp/bench-e2e-stage-$t-$$" ;;
	spark-hfile) testenv/bin/spark-job hfile "$rootdir" "$SNAP" "$t" --staging "hdfs://$nn/tmp/bench-e2e-stage-$t-$$" ;;
	spark-put) testenv/bin/spark-job put "$rootdir" "$SNAP" "$t" --batch "$BATCH" ;;
	rekey-*) run_rekey "$c" "$t" ;;
	esac
}

# make bench-e2e builds bin/rekey first; started alone, the script builds it.
[ -x bin/rekey ] || make -s build
all="rekey-put-1w rekey-put-2w rekey-hfile-1w rekey-hfile-2w java-put java-hfile spark-hfile spark-put"
read -r -a list <<<"${CONTENDERS:-$all}"
# Build the Spark module once, outside any timing; from here on the oracle
# and spark-job skip their rebuild checks, so no timed call ever waits for
# Maven.
case " ${list[*]} " in *" spark-"*) testenv/bin/spark-job --build-only ;; esac
testenv/bin/build
export TESTENV_NO_BUILD=1

# verify_rows TABLE ROUND: `rekey verify` of the target the puts contender
# just wrote, the 100 heaviest entities and a sample of 1000 from the run's
# sketch, against --all (every entity: both sides read whole), through the
# live table's scans and (all-snapshot) through a snapshot verify takes of
# it (--snapshot auto); time and bytes read on each side, whole process.
verify_rows() {
	local t="$1" r="$2" mode out tm
	for mode in sample all all-snapshot; do
		local args=(--heaviest 100 --sample 1000)
		case "$mode" in
		all) args=(--all) ;;
		all-snapshot) args=(--all --snapshot auto --snapshot-root "$rootdir") ;;
		esac
		out="$BENCH_DIR/verify-$mode.$r.json" tm="$BENCH_DIR/verify-$mode.$r.time"
		settle
		if /usr/bin/time -f '%e %U %S %M' -o "$tm" bin/rekey verify "$BENCH_DIR/$t.yaml" --zk "$zk" --table "$t" --json "${args[@]}" >"$out" 2>"$BENCH_DIR/verify-$mode.$r.err"; then
			read -r wall user sys rss < <(tail -n 1 "$tm") || true
			python3 scripts/e2e_verify_row.py "$out" "$mode" "$r" "$wall" "$user" "$sys" "$rss" >>"$BENCH_DIR/verify.jsonl"
			echo "   verify ($mode): $(tail -n 1 "$BENCH_DIR/verify.jsonl")"
		else
			echo "   verify ($mode): FAILED or mismatched (exit $?), see $out" >&2
		fi
	done
}

: >"$BENCH_DIR/verify.jsonl"
n=${#list[@]}
for ((r = 1; r <= ROUNDS; r++)); do
	echo "== round $r of $ROUNDS"
	for ((k = 0; k < n; k++)); do
		c="${list[$(((k + r - 1) % n))]}"
		t="bench_e2e_t_${c//-/_}"
		testenv/bin/oracle drop-table "$t" >/dev/null
		target_spec "$t" >"$BENCH_DIR/$t.spec.json"
		testenv/bin/oracle seed "$BENCH_DIR/$t.spec.json" >/dev/null
		out="$BENCH_DIR/$c.$r.out" err="$BENCH_DIR/$c.$r.err" tm="$BENCH_DIR/$c.$r.time"
		# Each contender starts on a quiet cluster (the target's creation,
		# the last contender's writes and drop settled).
		settle
		status=ok
		if ! /usr/bin/time -f '%e %U %S %M' -o "$tm" bash -c "$(declare -f contender_cmd run_rekey); $(declare -p rootdir SNAP BATCH nn zk BENCH_DIR REKEY_ARGS); contender_cmd $c $t" >"$out" 2>"$err"; then
			status=failed
			echo "   $c: FAILED (tail of $err):" >&2
			tail -n 15 "$err" >&2
		fi
		line="$(grep '^{' "$out" | tail -n 1 || true)"
		[ -n "$line" ] || line=null
		got=null
		if [ "$status" = ok ]; then
			got="$(testenv/bin/oracle digest-table "$t")"
			if ! python3 scripts/e2e_target_ok.py "$BENCH_DIR/expected.json" "$got"; then status=wrong; fi
		fi
		# The last line: GNU time puts "Command exited with ..." before it.
		read -r wall user sys rss < <(tail -n 1 "$tm") || true
		printf '{"contender":"%s","round":%d,"status":"%s","wall_s":%s,"cpu_s":%s,"peak_rss_kb":%s,"target":%s,"result":%s}\n' \
			"$c" "$r" "$status" "${wall:-null}" "$(python3 -c "print(round(${user:-0}+${sys:-0},2))")" "${rss:-null}" "$got" "$line" >>"$runs"
		echo "   $c: $status, ${wall:-?} s wall, $(python3 -c "print(round(${user:-0}+${sys:-0},1))") s CPU, $((${rss:-0} / 1024)) MB peak RSS"
		if [ "$c" = rekey-put-1w ] && [ "$status" = ok ]; then
			verify_rows "$t" "$r"
		fi
		testenv/bin/oracle drop-table "$t" >/dev/null
	done
done

python3 scripts/e2e_summary.py "$runs" "$RESULTS" "$SIZE" "$ROUNDS" "$BATCH" "$BENCH_DIR/source.json" "$BENCH_DIR/expected.json" "$BENCH_DIR/verify.jsonl"
python3 scripts/e2e_chart.py "$RESULTS" "$CHART"
