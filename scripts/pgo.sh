#!/usr/bin/env bash
# scripts/pgo.sh: refresh cmd/rekey/default.pgo, the CPU profile that
# `go build` (and `go install`) optimise the rekey binary for: Go's
# profile-guided optimisation inlines the hot calls the profile shows (the
# cell decoders under the scanner, the sort and encode of staged files).
#
# It needs the test cluster (testenv/bin/up). It seeds a training table of
# its own (not the bench's data, so `make bench` measures a binary trained
# on other cells), then profiles, with a binary built without a profile,
# what a job does: plan, run into staged HFiles (2 workers, over HDFS), run
# into live puts, and verify both targets. The profiles are merged into one.
# Run it after a change that moves the hot paths; a stale profile only
# costs the optimisation, never correctness.
set -euo pipefail
cd "$(dirname "$0")/.."
. testenv/bin/lib.sh

rootdir="$(state_get hbase_rootdir)"
zk="$(state_get zookeeper_quorum)"
if [ -z "$rootdir" ] || ! control ping >/dev/null 2>&1; then
	echo "pgo: the test cluster is not up (testenv/bin/up)" >&2
	exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/rekey-pgo-XXXXXX")
trap 'rm -rf "$dir"' EXIT
go build -pgo=off -o "$dir/rekey" ./cmd/rekey

src=pgo_train_src snap=pgo_train
family='{"name": "d", "encoding": "FAST_DIFF", "compression": "SNAPPY", "versions": 3}'
splits='"s000500", "s001000", "s001500"'
cat >"$dir/source.json" <<JSON
{"table": "$src", "seed": 21, "families": [$family], "split_keys": [$splits],
 "steps": [
  {"op": "readings", "sensors": 2000, "readings": 250, "versions": 2, "value_min": 4, "value_max": 24,
   "heavy": [{"index": 11, "readings": 300000}, {"index": 1501, "readings": 60000}], "deletes": 40, "flush_before_deletes": true},
  {"op": "flush"},
  {"op": "snapshot", "name": "$snap"}]}
JSON
testenv/bin/oracle delete-snapshot "$snap" >/dev/null 2>&1 || true
testenv/bin/oracle drop-table "$src" >/dev/null 2>&1 || true
testenv/bin/oracle seed "$dir/source.json" >/dev/null
testenv/bin/oracle drop-table "$src" >/dev/null

job="$dir/job.yaml"
sed -e "s|^  root: .*|  root: $rootdir|" -e "s|^  name: .*|  name: $snap|" \
	-e "s|^  table: .*|  table: pgo_train_t|" -e "s|^bad_keys: .*|bad_keys: {action: fail}|" \
	configs/wide_to_bucketed.yaml >"$job"
printf '{"table": "pgo_train_t", "families": [%s], "split_keys": [%s], "steps": []}\n' "$family" "$splits" >"$dir/target.json"
testenv/bin/oracle drop-table pgo_train_t >/dev/null 2>&1 || true
testenv/bin/oracle seed "$dir/target.json" >/dev/null

r="$dir/rekey"
quiet=(--progress none)
"$r" plan "$job" --sample 0 --cpuprofile "$dir/1.prof" >/dev/null
"$r" run "$job" --sink hfiles --offline --staging "$dir/out" --workers 2 --fresh "${quiet[@]}" \
	--checkpoint "$dir/out/state/checkpoint.json" --cpuprofile "$dir/2.prof" >/dev/null 2>&1
"$r" verify "$job" --staging "$dir/out" --sketch "$dir/out/state/entities.json" --cpuprofile "$dir/3.prof" >/dev/null
"$r" run "$job" --sink puts --zk "$zk" --workers 2 --fresh "${quiet[@]}" \
	--checkpoint "$dir/puts/checkpoint.json" --cpuprofile "$dir/4.prof" >/dev/null 2>&1
"$r" verify "$job" --zk "$zk" --table pgo_train_t --all --cpuprofile "$dir/5.prof" >/dev/null

go tool pprof -proto "$dir"/[1-5].prof >"$dir/merged.pgo" 2>/dev/null
mv "$dir/merged.pgo" cmd/rekey/default.pgo
testenv/bin/oracle drop-table pgo_train_t >/dev/null
testenv/bin/oracle delete-snapshot "$snap" >/dev/null 2>&1 || true
echo "pgo: wrote cmd/rekey/default.pgo ($(wc -c <cmd/rekey/default.pgo) bytes) from plan, run (staged, puts) and verify of $snap"
