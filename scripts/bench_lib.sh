# Sourced by scripts/bench.sh and scripts/bench-e2e.sh once the test
# cluster is up (testenv/bin/lib.sh sourced): what both use to measure
# beside the mini cluster, which shares the machine's cores.

cluster_pid="$(state_get pid)"

# cluster_cpu prints the CPU seconds (user+system) the test cluster's JVM
# (NameNode, DataNode, region server, ZooKeeper: one process) has used.
cluster_cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$cluster_pid/stat"
}

# settle waits (up to 30 s) until the cluster JVM uses under a tenth of a
# core: after puts, a table's creation or its drop it flushes, compacts
# and assigns regions for a while, and a measurement started meanwhile
# shares its cores with that.
settle() {
	local i a b
	for ((i = 0; i < 60; i++)); do
		a="$(cluster_cpu)"
		sleep 0.5
		b="$(cluster_cpu)"
		if awk -v a="$a" -v b="$b" 'BEGIN{exit !(b - a < 0.05)}'; then
			return 0
		fi
	done
	echo "bench: the cluster is still busy after 30 s; measuring anyway" >&2
}
