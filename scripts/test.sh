#!/usr/bin/env bash
# Runs every test: unit tests, fuzz seeds, and integration tests against the
# HBase mini cluster. Starts the cluster when none is up and stops what it
# started, also when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."

started=0
cleanup() {
	if [ "$started" = 1 ]; then
		testenv/bin/down || true
	fi
}
trap cleanup EXIT

testenv/bin/build
if testenv/bin/status >/dev/null 2>&1; then
	echo "test: reusing the mini cluster that is already up"
else
	testenv/bin/up
	started=1
fi

export REKEY_REQUIRE_CLUSTER=1
# gotestsum (a tool pinned in go.mod) runs go test -json: the usual
# per-package lines, the failures' output at the end, and the events for
# the skip summary, which fails the run if an integration test skipped
# while the cluster was up.
mkdir -p bin
events=bin/test-events.json
status=0
go tool gotestsum --format standard-quiet --hide-summary skipped --jsonfile "$events" -- \
	-count=1 -timeout 25m ./... || status=$?
scripts/test_skips.py "$events" || status=1
exit "$status"
