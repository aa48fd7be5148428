# Shared by the testenv scripts (sourced, not run).
TESTENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$TESTENV/state.json"
RUN="$TESTENV/run"
# SECURE=1: the kerberized cluster, with its own state file and run
# directory, so it runs beside the plain one (testenv/README.md).
SECURE_PROPS=()
ROOT_PROPS=()
if [ "${SECURE:-}" = 1 ]; then
	STATE="$TESTENV/state-secure.json"
	RUN="$TESTENV/run-secure"
	SECURE_PROPS=(-Drekey.secure=1)
fi
# TESTENV_ROOTDIR=s3: a cluster whose hbase.rootdir is on its own S3 server
# (s3a://rekey-test/user/root/test-data/UUID; the WALs on an HDFS), with its own state
# file and run directory, beside the plain one (testenv/README.md).
if [ "${TESTENV_ROOTDIR:-}" = s3 ] && [ "${SECURE:-}" = 1 ]; then
	echo "testenv: SECURE=1 and TESTENV_ROOTDIR=s3 are two different clusters; set one" >&2
	exit 1
fi
if [ -n "${TESTENV_ROOTDIR:-}" ] && [ "${TESTENV_ROOTDIR}" != s3 ]; then
	echo "testenv: TESTENV_ROOTDIR=$TESTENV_ROOTDIR: the only other root dir testenv knows is s3" >&2
	exit 1
fi
if [ "${TESTENV_ROOTDIR:-}" = s3 ]; then
	STATE="$TESTENV/state-s3root.json"
	RUN="$TESTENV/run-s3root"
	ROOT_PROPS=(-Drekey.rootfs=s3a://rekey-test)
fi

# cluster_classpath prints the cluster JVM's classpath. Hadoop reads
# ssl-server.xml from the classpath: a secure cluster writes it to
# RUN/secure/sslconf, which goes ahead of the jars.
cluster_classpath() {
	if [ "${SECURE:-}" = 1 ]; then
		echo "$RUN/secure/sslconf:$(classpath)"
	else
		classpath
	fi
}

# state_get KEY prints one value of state.json (numbers and strings only).
state_get() {
	sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\} *$/\1/p" "$STATE"
}

# The HBase version testenv builds and runs (a Maven version of
# org.apache.hbase:hbase-testing-util). Each version builds into its own
# directory, target/ for the default, so versions never share classes.
DEFAULT_HBASE_VERSION=2.5.11-hadoop3
KNOWN_HBASE_VERSIONS=(2.5.11-hadoop3 2.6.1-hadoop3 3.0.0-alpha-4)

# build_dir VERSION prints the build directory of that HBase version.
build_dir() {
	if [ "$1" = "$DEFAULT_HBASE_VERSION" ]; then
		echo "$TESTENV/target"
	else
		echo "$TESTENV/target-$1"
	fi
}

# check_version VERSION fails for a version testenv was not made for (the
# Java sources and pom.xml's profiles are checked against these only).
check_version() {
	local v
	for v in "${KNOWN_HBASE_VERSIONS[@]}"; do
		[ "$1" = "$v" ] && return 0
	done
	echo "testenv: HBASE_VERSION=$1 is not one of ${KNOWN_HBASE_VERSIONS[*]}" >&2
	return 1
}

# running_version prints the HBase version of the cluster state.json
# describes (nothing without one; the default for a state.json written
# before it named its version).
running_version() {
	[ -f "$STATE" ] || return 0
	local v
	v="$(state_get hbase_version)"
	echo "${v:-$DEFAULT_HBASE_VERSION}"
}

# use_version picks HBASE_VERSION for a script that talks to the running
# cluster: that cluster's version (HBase's client, readers and snapshot
# code must be the cluster's own), HBASE_VERSION when no cluster is up,
# else the default. A HBASE_VERSION that differs from the running
# cluster's fails rather than judging one version with another's code.
use_version() {
	local have
	have="$(running_version)"
	if [ -n "$have" ] && [ -n "${HBASE_VERSION:-}" ] && [ "$have" != "$HBASE_VERSION" ]; then
		echo "testenv: HBASE_VERSION=$HBASE_VERSION, but the cluster in $STATE runs $have" >&2
		return 1
	fi
	HBASE_VERSION="${have:-${HBASE_VERSION:-$DEFAULT_HBASE_VERSION}}"
	export HBASE_VERSION
	check_version "$HBASE_VERSION"
}

# classpath prints the Java classpath of HBASE_VERSION's build: the
# oracle jar and its dependencies.
classpath() {
	local dir
	dir="$(build_dir "$HBASE_VERSION")"
	echo "$dir/testenv.jar:$(cat "$dir/classpath.txt")"
}

# control CMD sends one command to the cluster's control port and prints
# the answer line; fails when nothing answers.
control() {
	local port
	port="$(state_get control_port)"
	[ -n "$port" ] || return 1
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s\n' "$1" >&3
	local line
	IFS= read -r -t "${CONTROL_TIMEOUT:-300}" line <&3 || { exec 3>&-; return 1; }
	exec 3>&-
	printf '%s\n' "$line"
	[[ "$line" == ok* ]]
}

# running PID: the process exists and is not a zombie (a killed cluster
# whose parent is gone may linger as one, and kill -0 succeeds on those).
running() {
	[ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 1
	local st
	st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)"
	[ "$st" != Z ]
}

# alive reports whether state.json names a live cluster that answers ping.
alive() {
	[ -f "$STATE" ] || return 1
	local pid
	pid="$(state_get pid)"
	running "$pid" || return 1
	CONTROL_TIMEOUT=10 control ping >/dev/null 2>&1
}

# JVM_OPENS lets Hadoop and HBase reach into JDK internals on Java 17 (the
# same list HBase's own launcher passes).
JVM_OPENS=(
	-XX:+IgnoreUnrecognizedVMOptions
	-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
	--add-opens=java.base/java.lang=ALL-UNNAMED
	--add-opens=java.base/java.lang.reflect=ALL-UNNAMED
	--add-opens=java.base/java.io=ALL-UNNAMED
	--add-opens=java.base/java.nio=ALL-UNNAMED
	--add-opens=java.base/sun.nio.ch=ALL-UNNAMED
	--add-opens=java.base/java.net=ALL-UNNAMED
	--add-opens=java.base/java.util=ALL-UNNAMED
	--add-opens=java.base/java.util.concurrent=ALL-UNNAMED
	--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
	--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED
	--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED
	--add-exports=java.base/sun.net.dns=ALL-UNNAMED
	--add-exports=java.base/sun.net.util=ALL-UNNAMED
	--add-exports=java.base/sun.nio.ch=ALL-UNNAMED
	--add-opens=java.base/sun.security.action=ALL-UNNAMED
)
