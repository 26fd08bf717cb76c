#!/usr/bin/env bash
# The soak (make soak; docs/operations.md#soak): the four components over
# SOAK_MPAS autoscalers for SOAK_DURATION on the loopback testbed, with the
# API server, the agent and the recommender restarted in turn every
# SOAK_RESTART_EVERY, each component sampled and its growth judged.
#
#  1. Starts a testbed sized for the autoscalers' pods (hack/testbed/up.sh)
#     and stops it at the end, or, with SOAK_USE_RUNNING=1, uses the one
#     running from $AWARE_TESTBED_DIR and leaves it running.
#  2. Runs TestSoak (e2e/soak_test.go, build tags e2e and soak), which
#     builds the components, runs the soak and writes report.md,
#     report.json, soak.svg and the components' logs into $SOAK_OUT
#     (default soak-out/). It fails if the soak does.
#
# Extra arguments go to the test after -args, e.g. -soak.churn=60 or
# -soak.rl-share=0.5 (e2e/soak_test.go lists the flags). Hours long; not
# part of make check.
#
# SOAK_REJUDGE=path/to/report.json instead judges a recorded soak again
# (e2e/cmd/soakjudge) and writes report.md, report.json and soak.svg into
# $SOAK_OUT, without a testbed; extra arguments then go to soakjudge
# (-settle, -warmup).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${SOAK_OUT:-${ROOT}/soak-out}"

if [[ -n "${SOAK_REJUDGE:-}" ]]; then
	# Relative paths are the caller's, not the module root's.
	abs() { if [[ "$1" == /* ]]; then echo "$1"; else echo "${PWD}/$1"; fi; }
	in="$(abs "${SOAK_REJUDGE}")" out="$(abs "${OUT}")"
	cd "${ROOT}"
	exec go run ./e2e/cmd/soakjudge -in "${in}" -out "${out}" "$@"
fi
DURATION="${SOAK_DURATION:-2h}"
MPAS="${SOAK_MPAS:-1000}"
RESTART_EVERY="${SOAK_RESTART_EVERY:-20m}"

# seconds DURATION: a Go duration of hours, minutes and seconds ("2h",
# "1h30m", "15m") in whole seconds.
seconds() {
	local d="$1" total=0 n unit
	[[ "${d}" =~ ^([0-9]+[hms])+$ ]] || {
		echo "soak.sh: ${d}: want a duration such as 2h, 1h30m or 15m" >&2
		return 1
	}
	while [[ "${d}" =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}" d="${BASH_REMATCH[3]}"
		case "${unit}" in
		h) total=$((total + n * 3600)) ;;
		m) total=$((total + n * 60)) ;;
		s) total=$((total + n)) ;;
		esac
	done
	echo "${total}"
}
duration_s="$(seconds "${DURATION}")"
seconds "${RESTART_EVERY}" >/dev/null
# The set-up (up to -soak.setup-timeout, 20m by default, twice: the pods,
# then the first recommendations), the final checks and the report fit in
# the hour on top.
timeout="$((duration_s + 2 * 1200 + 3600))s"

# shellcheck source=testbed/lib.sh
source "${ROOT}/hack/testbed/lib.sh"
if [[ "${SOAK_USE_RUNNING:-0}" == 1 ]]; then
	running_component >/dev/null || die "SOAK_USE_RUNNING=1 but no testbed runs from ${TESTBED_DIR}"
else
	if running="$(running_component)"; then
		die "a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }): set SOAK_USE_RUNNING=1 to use it, or AWARE_TESTBED_DIR and AWARE_TESTBED_BASE_PORT to run beside it"
	fi
	# Room for every autoscaler at its maximum of two replicas; KWOK's
	# nodes cost nothing per pod of capacity.
	export AWARE_TESTBED_NODES="${AWARE_TESTBED_NODES:-4}"
	export AWARE_TESTBED_NODE_PODS="${AWARE_TESTBED_NODE_PODS:-$((MPAS / 2 + 110))}"
	export AWARE_TESTBED_NODE_CPU="${AWARE_TESTBED_NODE_CPU:-1000}"
	export AWARE_TESTBED_NODE_MEMORY="${AWARE_TESTBED_NODE_MEMORY:-4Ti}"
	export AWARE_TESTBED_CLIENT_QPS="${AWARE_TESTBED_CLIENT_QPS:-200}"
	# The recommender reads history from Prometheus, not the pods' series
	# every 5 s: its scrapes of KWOK cost CPU per pod.
	export AWARE_TESTBED_KUBELET_SCRAPE_INTERVAL="${AWARE_TESTBED_KUBELET_SCRAPE_INTERVAL:-1m}"
	# shellcheck disable=SC2317 # called through the trap
	cleanup() { "${ROOT}/hack/testbed/down.sh" || echo "soak.sh: down.sh failed" >&2; }
	trap cleanup EXIT
	"${ROOT}/hack/testbed/up.sh"
fi
# shellcheck disable=SC1091 # written by up.sh at run time
source "${TESTBED_DIR}/env"
export AWARE_TESTBED_DIR="${TESTBED_DIR}"

mkdir -p "${OUT}"
cd "${ROOT}"
go test -tags 'e2e soak' -count=1 -timeout "${timeout}" -run '^TestSoak$' -v ./e2e/ -args \
	-soak.duration="${DURATION}" -soak.mpas="${MPAS}" -soak.restart-every="${RESTART_EVERY}" \
	-soak.out="${OUT}" "$@" 2>&1 | tee "${OUT}/soak.log"
