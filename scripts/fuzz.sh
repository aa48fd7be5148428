#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 10s).
# `go test` alone already runs each target's seed corpus; this explores.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
status=0
while IFS= read -r line; do
	file="${line%%:*}"
	name="$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")"
	pkg="./$(dirname "$file")"
	echo "== $pkg $name ($FUZZTIME)"
	if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME"; then
		status=1
	fi
done < <(grep -rnE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' --include='*_test.go' . | sed 's|^\./||')
exit $status
