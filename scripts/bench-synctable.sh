#!/usr/bin/env bash
# rekey verify against the comparison HBase users run today (issue 54):
# HBase's HashTable on the source, then SyncTable --dryrun=true against the
# target, each a MapReduce job on the mini cluster's YARN (testenv's
# MiniMRYarnCluster), beside `rekey verify --all` on the same pair.
#
# The pair: a tall table (row = customer "|" order, two columns, one
# version) seeded by HBase's client, flushed and snapshotted; an identity
# `rekey run` (the same layout on both sides, so SyncTable, which compares
# tables keyed alike, can judge it) copies the snapshot into a target
# pre-split like the source; then three differences are planted in the
# target with HBase's client: a cell deleted, a value changed, a row added
# of a customer the source never had. Setup (seed, copy, plant, flushes, YARN's
# start) is outside every timer.
#
# Contenders, each a whole process as a user starts it, on the same two
# cores, after a warm-up run of each and once the cluster is quiet:
#
#   hashtable+synctable   testenv/bin/oracle hash-table SOURCE DIR, then
#                         sync-table --dryrun=true DIR SOURCE TARGET: the
#                         tools' own ToolRunner entry points with their
#                         default options; wall = both processes, CPU =
#                         both client JVMs + every task (CPU_MILLISECONDS)
#   rekey-verify          bin/rekey verify JOB --all --retries 0 (the live
#                         target through the region servers, as SyncTable
#                         reads it; no re-reads: SyncTable makes none)
#   rekey-verify-snapshot the same with --snapshot auto (verify snapshots
#                         the target and reads its HFiles)
#   rekey-verify-retries  the same as rekey-verify with the default
#                         back-off re-reads of differing entities (what a
#                         user gets without the flag)
#
# Before any ratio is printed, both sides must have reported every planted
# difference (scripts/synctable_summary.py checks each run); a run that
# missed one is recorded "wrong", never as a time.
#
#   CUSTOMERS=N    customers in the source (default 20000: about 1.3M cells)
#   ROUNDS=N       measured rounds after the warm-up (default 1)
#   TEST=0         skip TestVerifyAgreesWithSyncTable (the small version,
#                  exact counts; REKEY_SYNCTABLE=1), which runs first
#   BENCH_DIR      scratch (default /tmp/rekey-bench-synctable)
#   RESULTS        output (default bench/results/verify-vs-synctable.json)
set -euo pipefail
cd "$(dirname "$0")/.."

CUSTOMERS="${CUSTOMERS:-20000}"
ROUNDS="${ROUNDS:-1}"
BENCH_DIR="${BENCH_DIR:-/tmp/rekey-bench-synctable}"
RESULTS="${RESULTS:-bench/results/verify-vs-synctable.json}"
mkdir -p "$BENCH_DIR"
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
[ -x bin/rekey ] || make -s build

# cluster_children_cpu prints the CPU seconds of the cluster process's
# reaped children: every YARN container (the ApplicationMaster and each
# task attempt) is one, so its growth over a run is the whole job's
# container CPU, AM included (other children, a df now and then, are
# noise of milliseconds).
cluster_children_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($16 + $17) / hz}' "/proc/$cluster_pid/stat"
}

# MapReduce on YARN in the cluster process (a no-op when it runs; about a
# minute the first time), before anything is timed.
echo "== starting MapReduce on YARN (control channel yarn-start)"
exec 3<>"/dev/tcp/127.0.0.1/$(state_get control_port)"
echo yarn-start >&3
read -r answer <&3
exec 3<&-
case "$answer" in ok*) echo "   $answer" ;; *)
	echo "bench-synctable: yarn-start: $answer" >&2
	exit 1
	;;
esac

if [ "${TEST:-1}" != 0 ]; then
	echo "== TestVerifyAgreesWithSyncTable (the small pair, exact counts)"
	t0=$(date +%s)
	REKEY_SYNCTABLE=1 go test ./cmd/rekey -run '^TestVerifyAgreesWithSyncTable$' -count=1 -v -timeout 20m >"$BENCH_DIR/test.log" 2>&1 || {
		tail -n 40 "$BENCH_DIR/test.log" >&2
		echo "bench-synctable: TestVerifyAgreesWithSyncTable failed (log: $BENCH_DIR/test.log)" >&2
		exit 1
	}
	grep -E '^\s+synctable_test.go.*(HashTable|TestVerifyAgreesWithSyncTable:)' "$BENCH_DIR/test.log" | sed 's/^ */   /' || true
	echo "   passed in $(($(date +%s) - t0)) s"
fi

SRC=bench_synctable_src SNAP=bench_synctable_snap DST=bench_synctable_dst
splits='"c05000", "c10000", "c15000"'
case "$CUSTOMERS" in 20000) ;; *) splits="\"$(printf 'c%05d' $((CUSTOMERS / 4)))\", \"$(printf 'c%05d' $((CUSTOMERS / 2)))\", \"$(printf 'c%05d' $((CUSTOMERS * 3 / 4)))\"" ;; esac
echo "== seeding $SRC: $CUSTOMERS customers, 4 regions"
python3 scripts/synctable_data.py source "$CUSTOMERS" "$BENCH_DIR/source.cells"
testenv/bin/oracle drop-table "$SRC" "$DST" >/dev/null
testenv/bin/oracle delete-snapshot "$SNAP" >/dev/null 2>&1 || true
cat >"$BENCH_DIR/source.spec.json" <<JSON
{"table": "$SRC", "families": [{"name": "o", "encoding": "FAST_DIFF", "compression": "SNAPPY"}], "split_keys": [$splits],
 "steps": [{"op": "cells", "file": "$BENCH_DIR/source.cells"}, {"op": "flush"}, {"op": "snapshot", "name": "$SNAP"}]}
JSON
t0=$(date +%s)
testenv/bin/oracle seed "$BENCH_DIR/source.spec.json"
echo "   seeded in $(($(date +%s) - t0)) s"

echo "== the identity copy (rekey run) and three planted differences"
job="$BENCH_DIR/copy.yaml"
cat >"$job" <<YAML
source: {root: $rootdir, name: $SNAP}
target: {table: $DST, create: {split_keys: [${splits//\"/}]}}
source_layout:
  row: [{field: customer, type: string, sep: "|"}, {field: order, type: decimal}]
target_layout:
  row: [{field: customer, type: string, sep: "|"}, {field: order, type: decimal}]
entity: [customer]
bad_keys: {action: fail}
YAML
rm -rf "$BENCH_DIR/copy.rekey"
bin/rekey run "$job" --zk "$zk" --progress none --fresh >/dev/null
python3 scripts/synctable_data.py plant "$BENCH_DIR/source.cells" "$BENCH_DIR/plant.cells" "$BENCH_DIR/planted.json"
testenv/bin/oracle write-cells "$DST" "$BENCH_DIR/plant.cells"
# Both sides read the target from its store files, not a memstore.
testenv/bin/oracle flush "$DST" >/dev/null
echo "   planted: $(cat "$BENCH_DIR/planted.json")"

# timed NAME CMD...: runs CMD as one timed whole process, stdout to
# NAME.out; prints "wall user sys rss children_cpu cluster_cpu".
timed() {
	local name="$1" c0 k0 c1 k1
	shift
	c0="$(cluster_children_cpu)" k0="$(cluster_cpu)"
	/usr/bin/time -f '%e %U %S %M' -o "$BENCH_DIR/$name.time" "$@" >"$BENCH_DIR/$name.out" 2>"$BENCH_DIR/$name.err" || true
	c1="$(cluster_children_cpu)" k1="$(cluster_cpu)"
	read -r wall user sys rss < <(tail -n 1 "$BENCH_DIR/$name.time")
	echo "$wall $user $sys $rss $(awk -v a="$c0" -v b="$c1" 'BEGIN{printf "%.2f", b - a}') $(awk -v a="$k0" -v b="$k1" 'BEGIN{printf "%.2f", b - a}')"
}

export TESTENV_NO_BUILD=1
# run_contender CONTENDER ROUND: one run, one JSON line in runs.jsonl.
run_contender() {
	local c="$1" r="$2" tag="$1.$2" args
	settle
	local load
	load="$(cut -d' ' -f1-3 /proc/loadavg)"
	case "$c" in
	hashtable+synctable)
		local dir="hdfs://$nn/tmp/bench-synctable-hashes-$r-$$-$RANDOM" h s
		h="$(timed "$tag.hash" testenv/bin/oracle hash-table "$SRC" "$dir")"
		s="$(timed "$tag.sync" testenv/bin/oracle sync-table --dryrun=true "$dir" "$SRC" "$DST")"
		python3 scripts/synctable_summary.py row-mr "$c" "$r" "$load" "$h" "$BENCH_DIR/$tag.hash.out" "$s" "$BENCH_DIR/$tag.sync.out" >>"$runs"
		;;
	rekey-verify*)
		args=(--all --retries 0)
		case "$c" in
		rekey-verify-snapshot) args+=(--snapshot auto --snapshot-root "$rootdir") ;;
		rekey-verify-retries) args=(--all) ;;
		esac
		local v
		v="$(timed "$tag" bin/rekey verify "$job" --zk "$zk" --json "${args[@]}")"
		python3 scripts/synctable_summary.py row-rekey "$c" "$r" "$load" "$v" "$BENCH_DIR/$tag.out" >>"$runs"
		;;
	esac
	echo "   $(tail -n 1 "$runs" | python3 scripts/synctable_summary.py line)"
}

contenders=(hashtable+synctable rekey-verify rekey-verify-snapshot rekey-verify-retries)
echo "== warm-up: each contender once"
for c in "${contenders[@]}"; do run_contender "$c" 0; done
n=${#contenders[@]}
for ((r = 1; r <= ROUNDS; r++)); do
	echo "== round $r of $ROUNDS"
	for ((k = 0; k < n; k++)); do
		run_contender "${contenders[$(((k + r) % n))]}" "$r"
	done
done
python3 scripts/synctable_summary.py summary "$runs" "$BENCH_DIR/planted.json" "$RESULTS" "$CUSTOMERS" "$(wc -l <"$BENCH_DIR/source.cells")"
testenv/bin/oracle drop-table "$SRC" "$DST" >/dev/null
testenv/bin/oracle delete-snapshot "$SNAP" >/dev/null 2>&1 || true
