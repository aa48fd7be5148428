#!/usr/bin/env bash
# make compat: the suites where HBase itself is the judge, on HBase versions
# beside the default 2.5.11. For each version it starts testenv's mini
# cluster at that version (testenv/bin/up with HBASE_VERSION), runs the
# suites below against it (they find the cluster through state.json, so the
# version is transparent to them), and stops it. Then it has HBase 1.7.2
# write and dump snapshots (testenv/hbase1) and reads them with rekey.
#
#   COMPAT_VERSIONS  the versions (default: 2.6.1-hadoop3 3.0.0-alpha-4;
#                    empty: none, only the 1.7.2 part)
#   COMPAT_SUITES    names of the suites to run (default: all of SUITES)
#   COMPAT_HBASE1    0 leaves out HBase 1.7.2's snapshots (default 1)
#   COMPAT_DOCS      1 (default) rewrites docs/compat.md and README's
#                    matrix; 0 (CI) only bin/compat/results.json
#   TESTENV_HEAP     the cluster's heap (default here 2g)
#
# Each version's results live in bin/compat/VERSION/ (its suites' status
# and seconds, its steps' seconds, the commit and date it ran at, and the
# go test events); a run replaces the directories of the versions it runs
# only, so the matrix (bin/compat/results.json, docs/compat.md, README)
# shows every version's latest run, each with its own commit and date.
# Exits 1 when a suite of this run did not pass. Refuses to run cluster
# versions while a cluster is up in this worktree: it starts and stops
# clusters itself (COMPAT_VERSIONS= runs only the 1.7.2 part, which needs
# none).
set -euo pipefail
cd "$(dirname "$0")/.."

read -r -a versions <<<"${COMPAT_VERSIONS-2.6.1-hadoop3 3.0.0-alpha-4}"
out=bin/compat
# SUITES: a name, then package:pattern pairs (-run patterns of existing
# integration tests, each comparing rekey with what HBase reads or wrote).
SUITES=(
	"snapshot-read ./snapshot/:^TestIntegrationAgainstOracle$"
	"hfile-read ./hfile/:^TestOracleCluster$"
	"hfile-write ./hfile/:^(TestWriterOracle|TestWriterOracleChecksums|TestWriterBulkLoad)$"
	"run-puts ./pipeline/:^TestPresetsThroughPuts$"
	"run-hfiles ./pipeline/:^TestPresetsThroughHFiles$ ./sink/hfiles/:^(TestStageLoadCluster|TestStageLoadRetriesRefusedLoad)$"
	"verify ./verify/:^TestVerifyAgainstCluster$ ./cmd/rekey/:^TestRunThenVerify$"
)

if [ ${#versions[@]} -gt 0 ] && testenv/bin/status >/dev/null 2>&1; then
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

# seconds_since T0 prints the seconds since T0 (date +%s.%N), to 0.1 s.
seconds_since() {
	awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# begin_version V empties V's result directory and records the commit
# and date the run starts at.
begin_version() {
	local dir="$out/$1" head
	rm -rf "$dir"
	mkdir -p "$dir"
	head="$(git rev-parse --short=7 HEAD)"
	[ -z "$(git status --porcelain --untracked-files=no)" ] || head="$head-dirty"
	printf 'commit\t%s\ndate\t%s\n' "$head" "$(date -u '+%Y-%m-%d %H:%M UTC')" >"$dir/meta.tsv"
	: >"$dir/rows.tsv"
	: >"$dir/times.tsv"
}

# row V SUITE STATUS SECONDS EVENTS records one suite's outcome.
row() {
	printf '%s\t%s\t%s\t%s\n' "$2" "$3" "$4" "$5" >>"$out/$1/rows.tsv"
}

# run_suite V NAME PKG:PATTERN... runs one suite's tests, recording its
# exit status, seconds and go test events.
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
		REKEY_REQUIRE_CLUSTER=1 go test -count=1 -timeout 30m -json -run "$pattern" "$pkg" >>"$events" || status=1
	done
	row "$v" "$name" "$status" "$(seconds_since "$t0")" "$events"
}

# step V NAME CMD... runs CMD, recording its seconds as NAME; returns
# CMD's status.
step() {
	local v="$1" name="$2" t0 rc=0
	shift 2
	t0=$(date +%s.%N)
	"$@" || rc=$?
	printf '%s\t%s\n' "$name" "$(seconds_since "$t0")" >>"$out/$v/times.tsv"
	return "$rc"
}

# cluster_version V: build, start, every suite, stop, on HBase V.
cluster_version() {
	local v="$1" t0 ts s
	begin_version "$v"
	t0=$(date +%s.%N)
	if ! step "$v" build env HBASE_VERSION="$v" testenv/bin/build; then
		row "$v" build 1 0 -
		return 0
	fi
	started=1
	# A loaded machine can take minutes to start a master.
	if ! step "$v" up env HBASE_VERSION="$v" TESTENV_HEAP="${TESTENV_HEAP:-2g}" \
		TESTENV_TIMEOUT="${TESTENV_TIMEOUT:-900}" testenv/bin/up; then
		echo "compat: the HBase $v cluster did not start" >&2
		row "$v" cluster-start 1 0 -
		testenv/bin/down || true
		started=0
		return 0
	fi
	ts=$(date +%s.%N)
	for s in "${SUITES[@]}"; do
		# COMPAT_SUITES="a b": only the suites named (CI's short pass).
		if [ -n "${COMPAT_SUITES:-}" ] && [[ " $COMPAT_SUITES " != *" ${s%% *} "* ]]; then
			continue
		fi
		# shellcheck disable=SC2086 # the pairs are words
		run_suite "$v" $s
	done
	printf '%s\t%s\n' suites "$(seconds_since "$ts")" >>"$out/$v/times.tsv"
	step "$v" down testenv/bin/down || true
	started=0
	printf '%s\t%s\n' total "$(seconds_since "$t0")" >>"$out/$v/times.tsv"
}

# hbase1_version: HBase 1.7.2 writes and dumps snapshots, rekey reads them.
hbase1_version() {
	local v=1.7.2 t0
	begin_version "$v"
	t0=$(date +%s.%N)
	if step "$v" write testenv/hbase1/bin/make-snapshots "$out/$v/snapshots"; then
		REKEY_HBASE1_SNAPSHOTS="$PWD/$out/$v/snapshots" REKEY_REQUIRE_HBASE1=1 \
			run_suite "$v" snapshot-read-1x "./snapshot/:^TestHBase1Snapshots$"
	else
		row "$v" snapshot-read-1x 1 0 -
	fi
	printf '%s\t%s\n' total "$(seconds_since "$t0")" >>"$out/$v/times.tsv"
}

go build ./... # compile errors show here once, not in every suite
ran=()
for v in "${versions[@]}"; do
	cluster_version "$v"
	ran+=("$v")
done
if [ "${COMPAT_HBASE1:-1}" = 1 ]; then
	hbase1_version
	ran+=(1.7.2)
fi

docs=()
[ "${COMPAT_DOCS:-1}" = 1 ] && docs=(--docs docs/compat.md --readme README.md)
matrix_rc=0
scripts/compat_matrix.py "$out" --json "$out/results.json" --ran "${ran[@]}" "${docs[@]}" || matrix_rc=$?
# What the failed tests said, last: the table names a failed suite only,
# and a CI log is read from its end.
for v in "${ran[@]}"; do
	for events in "$out/$v"/*.json; do
		[ -s "$events" ] && scripts/test_failures.py --lines 60 "$events"
	done
done
exit "$matrix_rc"
