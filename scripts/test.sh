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
go test -count=1 -timeout 25m ./...
