#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each
# (FUZZTIME, default 20s). `go test -fuzz` takes one target in one package
# per run, so targets are discovered and run one by one. Seed corpora also
# run in `make test`; this adds new inputs on top.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME="${FUZZTIME:-20s}"

mapfile -t targets < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	dir="$(dirname "$f")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |${dir} |"
done)
if ((${#targets[@]} == 0)); then
	echo "no fuzz targets found" >&2
	exit 1
fi
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	echo "== ${name} (${dir}, ${FUZZTIME})"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "${FUZZTIME}" "${dir}"
done
echo "${#targets[@]} fuzz targets ran for ${FUZZTIME} each"
