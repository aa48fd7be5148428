#!/usr/bin/env bash
# make test-flakes [N=3]: the flake hunt. Runs the plain and destructive
# passes of `make test` (scripts/test-passes.sh) N times in a row on one
# mini cluster, under the load CI gives them (the same packages, two at a
# time on two cores), and prints every test that failed at least once,
# with how often and the start of its failure. Exit 1 when one did.
# The secure, S3-root and HBase 3.0 passes are not repeated here.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-3}

started=0
cleanup() {
	if [ "$started" = 1 ]; then
		testenv/bin/down || true
	fi
}
trap cleanup EXIT

testenv/bin/build
testenv/bin/azurite-install
if testenv/bin/status >/dev/null 2>&1; then
	echo "test-flakes: reusing the mini cluster that is already up"
else
	testenv/bin/up
	started=1
fi
export REKEY_REQUIRE_CLUSTER=1 ORACLE_QUICK_START=1
mkdir -p bin
rm -f bin/flakes-*.json
. scripts/test-passes.sh
for i in $(seq 1 "$n"); do
	t0=$(date +%s)
	plain_pass "bin/flakes-$i-plain.json" || true
	destructive_pass "bin/flakes-$i-destructive.json" || true
	echo "test-flakes: round $i of $n took $(($(date +%s) - t0))s"
done
scripts/test_flakes.py "$n" bin/flakes-*-plain.json bin/flakes-*-destructive.json
