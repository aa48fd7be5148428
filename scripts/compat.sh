#!/usr/bin/env bash
# make compat: the suites where HBase itself is the judge, on HBase versions
# beside the default 2.5.11. For each version it starts testenv's mini
# cluster at that version (testenv/bin/up with HBASE_VERSION), runs the
# suites below against it (they find the cluster through state.json, so the
# version is transparent to them), and stops it. Then it has HBase 1.7.2
# write and dump snapshots (testenv/hbase1) and reads them with rekey.
#
#   COMPAT_VERSIONS  the versions (default: 2.6.1-hadoop3 3.0.0-alpha-4)
#   COMPAT_HBASE1    0 skips the HBase 1.7.2 snapshots (default 1)
#   COMPAT_DOCS      1 (default) writes docs/compat.md and README's
#                    matrix; 0 (a partial run, as in CI) only
#                    bin/compat/results.json
#
# Results: bin/compat/results.json (every suite's status, tests and
# seconds; each version's build, start, suites and stop seconds), the go
# test events under bin/compat/VERSION/. Exits 1 when any suite did not
# pass. Refuses to run while a cluster is up in this worktree: it starts
# and stops clusters of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

versions=(${COMPAT_VERSIONS:-2.6.1-hadoop3 3.0.0-alpha-4})
out=bin/compat
# SUITES: name, then package:pattern pairs (-run patterns of existing
# integration tests, each comparing rekey with what HBase reads or wrote).
SUITES=(
	"snapshot-read ./snapshot/:^TestIntegrationAgainstOracle$"
	"hfile-read ./hfile/:^TestOracleCluster$"
	"hfile-write ./hfile/:^(TestWriterOracle|TestWriterOracleChecksums|TestWriterBulkLoad)$"
	"run-puts ./pipeline/:^TestPresetsThroughPuts$"
	"run-hfiles ./pipeline/:^TestPresetsThroughHFiles$ ./pipeline/stage/:^TestStageLoadCluster$"
	"verify ./verify/:^TestVerifyAgainstCluster$ ./cmd/rekey/:^TestRunThenVerify$"
)

if testenv/bin/status >/dev/null 2>&1; then
	echo "compat: a mini cluster is up in this worktree; stop it (testenv/bin/down) first" >&2
	exit 1
fi
started=0
cleanup() {
	if [ "$started" = 1 ]; then
		testenv/bin/down || true
	fi
}
trap cleanup EXIT

rm -rf "$out"
mkdir -p "$out"
rows="$out/rows.tsv" # version, suite, exit status, seconds, events file
times="$out/times.tsv" # version, step, seconds
: >"$rows"
: >"$times"

# seconds_since T0 prints the seconds since T0 (date +%s.%N), to 0.1 s.
seconds_since() {
	awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# run_suite VERSION NAME PKG:PATTERN... runs one suite's tests, recording
# its exit status, seconds and go test events.
run_suite() {
	local v="$1" name="$2" pair pkg pattern status=0 t0
	shift 2
	local events="$out/$v/$name.json"
	: >"$events"
	t0=$(date +%s.%N)
	for pair in "$@"; do
		pkg="${pair%%:*}"
		pattern="${pair#*:}"
		echo "compat: $v $name: go test -run '$pattern' $pkg"
		REKEY_REQUIRE_CLUSTER=1 go test -count=1 -timeout 20m -json -run "$pattern" "$pkg" >>"$events" || status=1
	done
	printf '%s\t%s\t%s\t%s\t%s\n' "$v" "$name" "$status" "$(seconds_since "$t0")" "$events" >>"$rows"
}

# step VERSION NAME CMD... runs CMD, recording its seconds as NAME.
step() {
	local v="$1" name="$2" t0
	shift 2
	t0=$(date +%s.%N)
	"$@"
	printf '%s\t%s\t%s\n' "$v" "$name" "$(seconds_since "$t0")" >>"$times"
}

go build ./... # compile errors show here once, not in every suite
for v in "${versions[@]}"; do
	mkdir -p "$out/$v"
	t0=$(date +%s.%N)
	step "$v" build env HBASE_VERSION="$v" testenv/bin/build
	started=1
	if ! step "$v" up env HBASE_VERSION="$v" TESTENV_HEAP="${TESTENV_HEAP:-2g}" testenv/bin/up; then
		echo "compat: the HBase $v cluster did not start" >&2
		printf '%s\t%s\t%s\t%s\t%s\n' "$v" "cluster-start" 1 0 - >>"$rows"
		testenv/bin/down || true
		started=0
		continue
	fi
	ts=$(date +%s.%N)
	for s in "${SUITES[@]}"; do
		# shellcheck disable=SC2086 # the pairs are words
		run_suite "$v" $s
	done
	printf '%s\t%s\t%s\n' "$v" suites "$(seconds_since "$ts")" >>"$times"
	step "$v" down testenv/bin/down
	started=0
	printf '%s\t%s\t%s\n' "$v" total "$(seconds_since "$t0")" >>"$times"
done

if [ "${COMPAT_HBASE1:-1}" = 1 ]; then
	v=1.7.2
	mkdir -p "$out/$v"
	t0=$(date +%s.%N)
	if step "$v" write testenv/hbase1/bin/make-snapshots "$out/$v/snapshots"; then
		REKEY_HBASE1_SNAPSHOTS="$PWD/$out/$v/snapshots" run_suite "$v" snapshot-read-1x "./snapshot/:^TestHBase1Snapshots$"
	else
		printf '%s\t%s\t%s\t%s\t%s\n' "$v" snapshot-read-1x 1 0 - >>"$rows"
	fi
	printf '%s\t%s\t%s\n' "$v" total "$(seconds_since "$t0")" >>"$times"
fi

docs=()
[ "${COMPAT_DOCS:-1}" = 1 ] && docs=(--docs docs/compat.md --readme README.md)
scripts/compat_matrix.py "$rows" "$times" --json "$out/results.json" "${docs[@]}"
