#!/usr/bin/env bash
# Runs the whole e2e tier N times in a row on one fresh clone of the
# current commit, each run on its own fresh testbed (hack/e2e.sh), and
# reports each run's result and duration: whether the suite is red only
# when something is wrong (docs/operations.md, "A suite that does not
# flake"). `make e2e-repeat [E2E_REPEAT=5] [E2E_REPEAT_OUT=dir]`; hours
# long (about half an hour a run on 2 cores), not in make check.
#
#   hack/e2e-repeat.sh [N]
#
# Into E2E_REPEAT_OUT (default e2e-repeat-out/ under the tree): run-I.log
# (the run's whole output, the failing tests' component logs included) and
# summary.txt (the commit, then one line per run). Every run goes on after
# a failure; the exit status is 1 if any run failed. Uncommitted changes
# are not in the clone: commit first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=testbed/lib.sh
source "${ROOT}/hack/testbed/lib.sh"

N="${1:-5}"
[[ "${N}" =~ ^[0-9]+$ ]] && ((N >= 1 && N <= 20)) || die "e2e-repeat.sh: N ${N}: want a number of runs from 1 to 20"
OUT="${E2E_REPEAT_OUT:-${ROOT}/e2e-repeat-out}"
if running="$(running_component)"; then
	die "e2e-repeat.sh: a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }); each run starts its own: stop it, or set AWARE_TESTBED_DIR and AWARE_TESTBED_BASE_PORT to run beside it"
fi

commit="$(git -C "${ROOT}" rev-parse --verify HEAD)"
if [[ -n "$(git -C "${ROOT}" status --porcelain --untracked-files=no)" ]]; then
	echo "e2e-repeat.sh: the tree has uncommitted changes; the runs test ${commit} without them" >&2
fi
WORK="$(mktemp -d)"
# shellcheck disable=SC2317 # called through the trap
cleanup() { rm -rf "${WORK}"; }
trap cleanup EXIT
git clone -q --no-hardlinks "${ROOT}" "${WORK}/aware"
git -C "${WORK}/aware" checkout -q --detach "${commit}"

mkdir -p "${OUT}"
summary="${OUT}/summary.txt"
{
	echo "e2e tier, ${N} runs in a row on a fresh clone of ${commit}"
	echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), started $(date -u +%FT%TZ)"
} | tee "${summary}"
failed=0
for ((i = 1; i <= N; i++)); do
	start="$(date +%s)"
	rc=0
	(cd "${WORK}/aware" && hack/e2e.sh) >"${OUT}/run-${i}.log" 2>&1 || rc=$?
	took="$(($(date +%s) - start))"
	result=passed
	if ((rc != 0)); then
		result="FAILED (exit ${rc}; failing tests: $(grep -E '^\s*--- FAIL' "${OUT}/run-${i}.log" | awk '{ print $3 }' | sort -u | paste -sd, - || true))"
		failed=$((failed + 1))
	fi
	printf 'run %d: %s in %dm%02ds\n' "${i}" "${result}" $((took / 60)) $((took % 60)) | tee -a "${summary}"
done
echo "${failed} of ${N} runs failed" | tee -a "${summary}"
((failed == 0))
