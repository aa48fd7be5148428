#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 10s),
# then the damage targets, whose property is "an error, or exactly the
# undamaged fixture's cells", for LONG_FUZZTIME each (default 2m).
# `go test` alone already runs each target's seed corpus; this explores.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
LONG_FUZZTIME="${LONG_FUZZTIME:-2m}"
# Damage targets: package and name, run for LONG_FUZZTIME.
long=(
	"./hfile FuzzDamagedHFile"
	"./snapshot FuzzDamagedSnapshot"
)
status=0
fuzz() { # pkg name time
	echo "== $1 $2 ($3)"
	if ! go test "$1" -run '^$' -fuzz "^${2}\$" -fuzztime "$3"; then
		status=1
	fi
}
while IFS= read -r line; do
	file="${line%%:*}"
	name="$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")"
	pkg="./$(dirname "$file")"
	if printf '%s\n' "${long[@]}" | grep -qx "$pkg $name"; then
		continue
	fi
	fuzz "$pkg" "$name" "$FUZZTIME"
done < <(grep -rnE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' --include='*_test.go' . | sed 's|^\./||')
for t in "${long[@]}"; do
	fuzz ${t} "$LONG_FUZZTIME"
done
exit $status
