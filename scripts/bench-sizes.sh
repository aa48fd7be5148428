#!/usr/bin/env bash
# The end-to-end bench at several sizes (issue 28): scripts/bench-e2e.sh
# once per SIZE, then, on the same snapshot in the same cluster, the parts
# the staged job is made of, each in a process of its own:
#
#   read     bin/benchtool read-snapshot ROOT SNAP 1: the snapshot read on
#            one worker (its own CPU seconds over the timed pass)
#   re-key   bin/rekey run --sink dry-run --workers 1 (read + re-key, whole
#            process, /usr/bin/time) less the read: the preset's cost
#   write    bin/benchtool write-hfile with the target's encoding and
#            compression (FAST_DIFF + SNAPPY), PARTS_CELLS cells: its rate,
#            and its whole process's CPU seconds (making the cells included)
#
# scripts/e2e_sizes.py then prints, for each contender at each size, wall
# and CPU seconds per million cells, and the staged job's CPU per cell
# beside the sum of the parts' (both measured in this call); it writes
# each size's records (bench/results/sizes-e2e-SIZE.json, with its chart,
# and sizes-parts-SIZE.json), bench/results/sizes.json and its chart (bench/results/sizes.svg, copied
# to docs/e2e-sizes.svg). Speed is measured and printed, never asserted;
# every contender's target is checked by bench-e2e.sh before its time
# counts.
#
#   SIZES="small default large"   the sizes, in order (default all three)
#   CONTENDERS, ROUNDS, BATCH     passed to bench-e2e.sh
#   PARTS_CELLS=1000000           cells of the write-hfile part
#   BENCH_DIR                     scratch (default /tmp/rekey-bench-sizes)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES="${SIZES:-small default large}"
PARTS_CELLS="${PARTS_CELLS:-1000000}"
BENCH_DIR="${BENCH_DIR:-/tmp/rekey-bench-sizes}"
mkdir -p "$BENCH_DIR" bench/results

testenv/bin/build
started=0
cleanup() { if [ "$started" = 1 ]; then testenv/bin/down || true; fi; }
trap cleanup EXIT
# One cluster for every size: bench-e2e.sh leaves a running one up.
if ! testenv/bin/status >/dev/null 2>&1; then
	testenv/bin/up
	started=1
fi
. testenv/bin/lib.sh
rootdir="$(state_get hbase_rootdir)"
zk="$(state_get zookeeper_quorum)"
go build -o bin/benchtool ./cmd/benchtool
[ -x bin/rekey ] || make -s build

# timed OUT CMD...: runs CMD with its stdout to OUT and prints
# "WALL CPU PEAK_KB" of the whole process.
timed() {
	local out="$1" tm="$BENCH_DIR/time.$$"
	shift
	/usr/bin/time -f '%e %U %S %M' -o "$tm" "$@" >"$out"
	read -r wall user sys rss < <(tail -n 1 "$tm")
	python3 -c "print($wall, round($user + $sys, 3), $rss)"
}

# parts SIZE: the three parts on the snapshot of SIZE, as one JSON line.
parts() {
	local size="$1" snap="bench_e2e_$1" job="$BENCH_DIR/dry-$1.yaml"
	sed -e "s|^  root: .*|  root: $rootdir|" -e "s|^  name: .*|  name: $snap|" \
		-e "s|^  table: .*|  table: bench_sizes_dry_run|" -e "s|^bad_keys: .*|bad_keys: {action: fail}|" \
		configs/wide_to_bucketed.yaml >"$job"
	local read dry write wtime
	timed "$BENCH_DIR/read-$size.json" bin/benchtool read-snapshot "$rootdir" "$snap" 1 >/dev/null
	read="$(grep '^{' "$BENCH_DIR/read-$size.json" | tail -n 1)"
	dry="$(timed "$BENCH_DIR/dry-$size.json" bin/rekey run "$job" --sink dry-run --workers 1 --zk "$zk" --fresh \
		--progress none --json --checkpoint "$BENCH_DIR/dry-$size.rekey/checkpoint.json")"
	wtime="$(timed "$BENCH_DIR/write-$size.json" bin/benchtool write-hfile "$BENCH_DIR/part.hfile" "$PARTS_CELLS" FAST_DIFF SNAPPY)"
	write="$(grep '^{' "$BENCH_DIR/write-$size.json" | tail -n 1)"
	read -r _ wcpu _ <<<"$wtime"
	write="${write%\}},\"process_cpu_s\":$wcpu}"
	rm -f "$BENCH_DIR/part.hfile"
	read -r dwall dcpu drss <<<"$dry"
	printf '{"size":"%s","read":%s,"dry_run":{"wall_s":%s,"cpu_s":%s,"peak_rss_kb":%s,"result":%s},"write":%s}\n' \
		"$size" "$read" "$dwall" "$dcpu" "$drss" "$(grep '^{' "$BENCH_DIR/dry-$size.json" | tail -n 1)" "$write"
}

records=()
for size in $SIZES; do
	echo "== SIZE=$size"
	SIZE="$size" RESULTS="bench/results/sizes-e2e-$size.json" BENCH_DIR="$BENCH_DIR/e2e-$size" scripts/bench-e2e.sh
	echo "== parts at SIZE=$size"
	parts "$size" >"bench/results/sizes-parts-$size.json"
	cat "bench/results/sizes-parts-$size.json"
	records+=("bench/results/sizes-e2e-$size.json" "bench/results/sizes-parts-$size.json")
done
python3 scripts/e2e_sizes.py bench/results/sizes.json "${records[@]}"
python3 scripts/e2e_sizes_chart.py bench/results/sizes.json bench/results/sizes.svg
cp bench/results/sizes.svg docs/e2e-sizes.svg
