#!/usr/bin/env bash
# Runs every test: unit tests, fuzz seeds, and integration tests against the
# HBase mini cluster. Starts the cluster when none is up and stops what it
# started, also when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."

started=0
secure_started=0
s3root_started=0
cleanup() {
	if [ "$started" = 1 ]; then
		testenv/bin/down || true
	fi
	if [ "$secure_started" = 1 ]; then
		SECURE=1 testenv/bin/down || true
	fi
	if [ "$s3root_started" = 1 ]; then
		TESTENV_ROOTDIR=s3 testenv/bin/down || true
	fi
}
trap cleanup EXIT

testenv/bin/build
# Azurite (npm) for the Azure tests; GCS's emulator runs inside the tests.
testenv/bin/azurite-install
if testenv/bin/status >/dev/null 2>&1; then
	echo "test: reusing the mini cluster that is already up"
else
	testenv/bin/up
	started=1
fi

export REKEY_REQUIRE_CLUSTER=1
# The oracle's JVMs start with C1 only, the serial collector and a
# class-data archive (testenv/bin/oracle): most test calls are short and
# their CPU went to the JVM's start, on the same 2 cores as everything else.
export ORACLE_QUICK_START=1
mkdir -p bin
status=0
. scripts/test-passes.sh
plain_pass bin/test-events.json || status=1
destructive_t0=$(date +%s)
destructive_pass bin/test-events-destructive.json || status=1
echo "test: destructive pass took $(($(date +%s) - destructive_t0))s"

# The secure suite: the kerberized cluster (KDC, Kerberos for HDFS and
# HBase, DataNodes accepting integrity or privacy: the client's default
# configuration settles on integrity, and the inspect test asks for each
# in turn, privacy also with AES) after the plain one, which is stopped first when
# this script started it (two clusters do not fit the 2 cores well). Its
# tests are named Secure*; in the plain pass above they skipped, loudly.
if [ "$started" = 1 ]; then
	testenv/bin/down || true
	started=0
fi
if SECURE=1 testenv/bin/status >/dev/null 2>&1; then
	echo "test: reusing the secure mini cluster that is already up"
else
	secure_t0=$(date +%s)
	# RPC protection privacy or integrity: the client's sealed and
	# integrity-only wrap tokens are both exercised, and a client that
	# offers only authentication meets no common protection
	# (TestSecureNoCommonProtection). Authentication alone (no wrap) is
	# the secure cluster's default: TESTENV_RPC_PROTECTION=authentication.
	SECURE=1 TESTENV_DATA_PROTECTION=integrity,privacy TESTENV_RPC_PROTECTION=privacy,integrity TESTENV_TICKET_LIFETIME=60s testenv/bin/up
	secure_started=1
	echo "test: secure cluster up in $(($(date +%s) - secure_t0))s"
fi
# The S3-root pass: a cluster whose hbase.rootdir is on its own S3 server
# (TESTENV_ROOTDIR=s3, WALs on an HDFS): HBase writes the snapshot into
# the bucket, rekey reads it, runs from it and bulk loads staging in the
# same bucket (TestS3Root*; in the plain pass they skipped, loudly).
# REKEY_TEST_S3ROOT=0 leaves it out.
s3root_pass() {
	local t0 rc=0
	t0=$(date +%s)
	if ! TESTENV_ROOTDIR=s3 TESTENV_HEAP=2g testenv/bin/up; then
		echo "test: the S3-root cluster did not start"
		return 1
	fi
	echo "test: S3-root cluster up in $(($(date +%s) - t0))s"
	REKEY_REQUIRE_CLUSTER=1 REKEY_REQUIRE_S3ROOT=1 TESTENV_ROOTDIR=s3 go tool gotestsum --format standard-quiet --hide-summary skipped --jsonfile bin/test-events-s3root.json -- \
		-count=1 -timeout 10m -run '^TestS3Root' ./pipeline/ || rc=1
	scripts/test_skips.py bin/test-events-s3root.json || rc=1
	TESTENV_ROOTDIR=s3 testenv/bin/down || true
	echo "test: S3-root pass took $(($(date +%s) - t0))s"
	return "$rc"
}

# Then the newest HBase (3.0.0-alpha-4, scripts/compat.sh), which starts
# and stops a plain cluster of that version itself: the runs through puts
# and through staged HFiles with bulk load, and verify (about 2 minutes of
# suites, plus the first Maven download of 3.0, about 4). The whole
# matrix (snapshot and HFile reads too, 2.6.1 and 1.7.2) is `make
# compat`; the README's matrix says when it last ran. REKEY_TEST_COMPAT=0
# leaves this out; =all runs every suite.
compat_suites="run-puts run-hfiles verify"
if [ "${REKEY_TEST_COMPAT:-1}" = all ]; then
	compat_suites=""
fi
compat_pass() {
	local t0 rc=0
	t0=$(date +%s)
	COMPAT_VERSIONS=3.0.0-alpha-4 COMPAT_HBASE1=0 COMPAT_DOCS=0 COMPAT_SUITES="$compat_suites" \
		scripts/compat.sh || rc=1
	echo "test: HBase 3.0.0-alpha-4 suites took $(($(date +%s) - t0))s"
	return "$rc"
}

# Both run one after the other in the background, beside the secure suite
# (whose longest tests wait for 60-second tickets to expire, with the CPU
# mostly idle) and the integrity-only DataNode pass, with their output
# kept until those are done: one after the other, they took 4 of CI's
# 29 minutes.
run_s3root=0
run_compat=0
if [ "${REKEY_TEST_S3ROOT:-1}" != 0 ]; then
	if TESTENV_ROOTDIR=s3 testenv/bin/status >/dev/null 2>&1; then
		echo "test: S3-root pass NOT run: an S3-root cluster this run did not start is up" >&2
		status=1
	else
		run_s3root=1
		s3root_started=1
	fi
fi
if [ "${REKEY_TEST_COMPAT:-1}" != 0 ]; then
	if testenv/bin/status >/dev/null 2>&1; then
		echo "test: compat suites NOT run: a mini cluster this run did not start is up" >&2
		status=1
	else
		run_compat=1
	fi
fi
background_passes() {
	local rc=0
	if [ "$run_s3root" = 1 ]; then
		s3root_pass || rc=1
	fi
	if [ "$run_compat" = 1 ]; then
		compat_pass || rc=1
	fi
	return "$rc"
}
background_pid=""
if [ "$run_s3root" = 1 ] || [ "$run_compat" = 1 ]; then
	background_passes >bin/test-background.log 2>&1 &
	background_pid=$!
fi

# -p 4: the secure suite's longest tests (a staged run outliving its
# tickets, keytab and ticket-cache renewals) mostly wait for 60-second
# tickets to expire.
secure_events=bin/test-events-secure.json
secure_t0=$(date +%s)
REKEY_REQUIRE_SECURE=1 go tool gotestsum --format standard-quiet --hide-summary skipped --jsonfile "$secure_events" -- \
	-count=1 -p 4 -timeout 15m -run 'Secure' ./... || status=$?
echo "test: secure suite took $(($(date +%s) - secure_t0))s"
scripts/test_skips.py "$secure_events" || status=1
# The Kerberized YARN submission (deploy/yarn) starts the secure cluster's
# YARN itself, and fails when it cannot: it must have run, not been left
# out by a rename.
scripts/test_ran.py "$secure_events" TestSecureYarnPhases 1 || status=1

# The DataNode qop mismatch (TestSecureDataNodeQopMismatchIsClear) needs
# DataNodes that protect with integrity alone, where the suite above needs
# them to accept privacy too: a short secure cluster of its own, for that
# one test (it skipped above, loudly), which must run here. Its NameNode
# keeps the default hadoop.rpc.protection (authentication), so the token
# file test runs again here: token authentication without a security
# layer, and DataNodes at integrity, where the suite above had privacy.
if [ "$secure_started" = 1 ]; then
	qop_t0=$(date +%s)
	SECURE=1 testenv/bin/down || true
	secure_started=0
	if SECURE=1 TESTENV_DATA_PROTECTION=integrity testenv/bin/up >bin/test-qop-up.log 2>&1; then
		secure_started=1
		REKEY_REQUIRE_SECURE=1 go tool gotestsum --format standard-quiet --hide-summary skipped --jsonfile bin/test-events-qop.json -- \
			-count=1 -run '^(TestSecureDataNodeQopMismatchIsClear|TestSecureTokenFileOnly)$' ./vfs/hdfs || status=1
		scripts/test_ran.py bin/test-events-qop.json TestSecureDataNodeQopMismatchIsClear 1 || status=1
		scripts/test_ran.py bin/test-events-qop.json TestSecureTokenFileOnly 1 || status=1
		# Stopped now, not at exit: the background passes still run.
		SECURE=1 testenv/bin/down || true
		secure_started=0
	else
		echo "test: the integrity-only secure cluster did not start:" >&2
		tail -20 bin/test-qop-up.log >&2
		status=1
	fi
	echo "test: integrity-only DataNode pass took $(($(date +%s) - qop_t0))s"
else
	echo "test: TestSecureDataNodeQopMismatchIsClear NOT run: the secure cluster was not started by this run" >&2
fi

if [ -n "$background_pid" ]; then
	background_rc=0
	wait "$background_pid" || background_rc=$?
	s3root_started=0
	cat bin/test-background.log
	[ "$background_rc" = 0 ] || status=1
fi
exit "$status"
