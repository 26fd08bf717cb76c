#!/usr/bin/env bash
# Runs every fuzz target in the module with a bounded budget each
# (FUZZTIME, default 30000x executions). `go test -fuzz` takes one target in
# one package per run, so targets are discovered and run one by one. Seed
# corpora also run in `make test`; this adds new inputs on top.
#
# The budget is a count, not a duration, on purpose: with a duration, Go's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# the deadline fires (a race in internal/fuzz, golang/go#72104), failing CI
# with no crasher. A count sets a limit instead of a deadline. The six
# targets of the time, at 30000x, took 42 s together on 2 cores.
#
# FUZZ_TARGETS, a regular expression, runs only the targets whose names
# match it (e.g. FUZZ_TARGETS='MPA|Prometheus'). `make fuzz-long` runs this
# script with FUZZTIME=10000000x and no go test timeout (FUZZ_TEST_TIMEOUT=0);
# it is not part of CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME="${FUZZTIME:-30000x}"
FUZZ_TARGETS="${FUZZ_TARGETS:-.}"
# go test's timeout covers fuzzing too: a long budget needs 0 (none).
# FUZZ_PARALLEL, when set, is the number of fuzzing workers (default: one
# per CPU), to leave cores to others on a shared machine.
FUZZ_TEST_TIMEOUT="${FUZZ_TEST_TIMEOUT:-10m}"
# FUZZ_MINIMIZETIME, when set, bounds the minimization of each new
# interesting input (go test -fuzzminimizetime; Go's default is 60s). Long
# runs of targets that find many new inputs spent more than half their time
# minimizing (docs/fuzzing.md); a shorter bound leaves that time to new
# inputs, at the price of larger corpus entries.

mapfile -t targets < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	dir="$(dirname "$f")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |${dir} |"
done)
selected=()
for t in "${targets[@]}"; do
	read -r _ name <<<"$t"
	if [[ "${name}" =~ ${FUZZ_TARGETS} ]]; then
		selected+=("$t")
	fi
done
if ((${#selected[@]} == 0)); then
	echo "no fuzz targets found (FUZZ_TARGETS=${FUZZ_TARGETS})" >&2
	exit 1
fi
for t in "${selected[@]}"; do
	read -r dir name <<<"$t"
	echo "== ${name} (${dir}, ${FUZZTIME}) started $(date -u +%FT%TZ)"
	start=${SECONDS}
	go test -run '^$' -timeout "${FUZZ_TEST_TIMEOUT}" ${FUZZ_PARALLEL:+-parallel "${FUZZ_PARALLEL}"} ${FUZZ_MINIMIZETIME:+-fuzzminimizetime "${FUZZ_MINIMIZETIME}"} -fuzz "^${name}\$" -fuzztime "${FUZZTIME}" "${dir}"
	echo "== ${name}: ${FUZZTIME} without a failure in $((SECONDS - start)) s"
done
echo "${#selected[@]} fuzz targets ran for ${FUZZTIME} each"
