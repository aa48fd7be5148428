#!/usr/bin/env bash
# make unit: the tests that need no cluster. go test hides the skip
# messages of passing packages, so this runs it verbosely into a log, prints
# the package lines and failures, and then says how many integration tests
# were skipped and how to run them.
set -uo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
go test -v "$@" ./... >"$log" 2>&1
status=$?
grep -E '^(ok|FAIL|---  *FAIL|--- FAIL|panic:|\?)' "$log"
if [ "$status" -ne 0 ]; then
	echo
	echo "failures (full log of the failing tests):"
	awk '/^(=== RUN|--- FAIL|FAIL|panic:)/ || /_test\.go:[0-9]+:/' "$log" | grep -B1 -A8 -- '--- FAIL\|panic:' | head -200
fi
skipped=$(grep -c 'integration test skipped' "$log" || true)
corpus=$(grep -c 'golden corpus not found' "$log" || true)
echo
if [ "$skipped" -gt 0 ]; then
	echo "note: $skipped integration tests were skipped: no HBase mini cluster is up."
	echo "      \`make test\` starts one (Java 17 and Maven), runs them and stops it."
fi
if [ "$corpus" -gt 0 ]; then
	echo "note: $corpus tests skipped: the golden corpus (../shared/corpus, or REKEY_CORPUS) is absent."
fi
exit "$status"
