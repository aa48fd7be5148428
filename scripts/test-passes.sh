# The passes over the plain mini cluster, sourced by scripts/test.sh (once)
# and scripts/test-flakes.sh (N times in a row). Each returns non-zero when
# a test failed or a skip hid a claim; the cluster must be up, with
# REKEY_REQUIRE_CLUSTER=1 and ORACLE_QUICK_START=1 exported.
#
# gotestsum (a tool pinned in go.mod) runs go test -json: the usual
# per-package lines, the failures' output at the end, and the events for
# the skip summary, which fails the pass if an integration test skipped
# while the cluster was up.

# plain_pass EVENTS: every package. go test starts packages in the order
# it is given them, two at a time on two cores; in import-path order the
# longest (pipeline, about 800 s, then snapshot, about 500 s) started last
# and ran alone at the end. Longest first, the two lanes end together.
plain_pass() {
	local events=$1 rc=0 first mod rest
	first="./pipeline ./snapshot ./hfile ./deploy/yarn ./hbase ./cmd/rekey ./sink/hfiles"
	mod=$(go list -m)
	rest=$(go list ./... | grep -v -x $(for p in $first; do printf -- ' -e %s' "$mod/${p#./}"; done))
	go tool gotestsum --format standard-quiet --hide-summary skipped --jsonfile "$events" -- \
		-count=1 -timeout 25m $first $rest || rc=1
	scripts/test_skips.py "$events" || rc=1
	return "$rc"
}

# destructive_pass EVENTS: the tests that stop a region server or the
# HMaster of the shared cluster (TestDestructive*, through
# testenv.RequireDestructive; in the plain pass they skip, loudly), one
# package at a time, once nothing else seeds or snapshots on the
# cluster: beside other packages they held a FLUSH snapshot up for the
# master's whole snapshot timeout. It fails unless it ran every one.
destructive_pass() {
	local events=$1 rc=0 defined
	defined=$({ grep -rho --include='*_test.go' '^func TestDestructive[A-Za-z0-9_]*' . || true; } | sort -u | wc -l)
	TESTENV_DESTRUCTIVE=1 REKEY_REQUIRE_DESTRUCTIVE=1 go tool gotestsum --format standard-quiet --hide-summary skipped --jsonfile "$events" -- \
		-count=1 -p 1 -timeout 15m -run '^TestDestructive' ./hbase ./pipeline || rc=1
	scripts/test_skips.py "$events" || rc=1
	scripts/test_ran.py "$events" TestDestructive "$defined" || rc=1
	return "$rc"
}
