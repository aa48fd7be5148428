# Shared by the testenv scripts (sourced, not run).
TESTENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$TESTENV/state.json"
RUN="$TESTENV/run"
# SECURE=1: the kerberized cluster, with its own state file and run
# directory, so it runs beside the plain one (testenv/README.md).
SECURE_PROPS=()
if [ "${SECURE:-}" = 1 ]; then
	STATE="$TESTENV/state-secure.json"
	RUN="$TESTENV/run-secure"
	SECURE_PROPS=(-Drekey.secure=1)
fi

# classpath prints the Java classpath: the oracle jar and its dependencies.
classpath() {
	echo "$TESTENV/target/testenv.jar:$(cat "$TESTENV/target/classpath.txt")"
}

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
