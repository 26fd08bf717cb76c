#!/usr/bin/env bash
# The real-node benchmark (make bench-real; docs/real-node.md): every
# autoscaling policy in turn against the same trace, on the test app running
# as real pods on a real kubelet joined to the loopback testbed.
#
#  1. Builds (or finds cached) VPA's three components (hack/vpa/build.sh) and
#     the load generator.
#  2. Starts a testbed and the real node (hack/testbed/up.sh,
#     hack/node/up.sh, which imports the images of `make images`) and stops
#     both at the end; with BENCH_REAL_USE_RUNNING=1 it uses the ones
#     running from $AWARE_TESTBED_DIR and leaves them running.
#  3. Runs the harness (go run -tags benchreal ./hack/benchreal), which
#     installs deploy/ as pods, runs VPA as processes, runs each policy and
#     writes results.json, results.txt, the load generator's records and the
#     logs into $BENCH_REAL_OUT (default bench-real-out/). With the
#     ensemble policy it trains the members first, or finds them in
#     $HOME/.cache/aware/agents (--agent-cache).
#
# Needs root. Extra arguments go to the harness, e.g. --policies hpa,fused
# --repeat 2 --first-rep 3 (go run -tags benchreal ./hack/benchreal -h
# lists them); --merge a.json,b.json reports several invocations together;
# --simulate then sets the simulator, calibrated from the runs, beside them
# (simulated.json, side-by-side.txt, sim-POLICY.svg). --merge needs no
# testbed: go run -tags benchreal ./hack/benchreal --merge ... --simulate.
# Each run lasts --duration (10 min by default) plus about a minute of
# set-up and teardown. Not part of make check or CI.
#
#   AWARE_IMAGES_TAG=TAG hack/bench-real.sh [harness args]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${BENCH_REAL_OUT:-${ROOT}/bench-real-out}"
# shellcheck source=node/lib.sh
source "${ROOT}/hack/node/lib.sh"

[[ -n "${AWARE_IMAGES_TAG:-}" ]] || die "set AWARE_IMAGES_TAG to the tag make images gave bin/images/aware-* (make bench-real does)"

vpa="$("${ROOT}/hack/vpa/build.sh")" || die "building VPA failed (see above)"
{ read -r VPA_VERSION; read -r VPA_BIN; read -r VPA_DIR; } <<<"${vpa}"
echo "bench-real.sh: VPA ${VPA_VERSION}" >&2
mkdir -p "${OUT}/bin"
# rl-agent trains the ensemble's members when they are not cached; the
# recommender's whatif reads the HPA runs' histories (--whatif).
(cd "${ROOT}" && go build -trimpath -o "${OUT}/bin/" ./e2e/cmd/loadgen ./rl-agent ./recommender)

if [[ "${BENCH_REAL_USE_RUNNING:-0}" == 1 ]]; then
	running_component >/dev/null || die "BENCH_REAL_USE_RUNNING=1 but no testbed runs from ${TESTBED_DIR}"
else
	if running="$(running_component)"; then
		die "a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }): set BENCH_REAL_USE_RUNNING=1 to use it (with its node), or AWARE_TESTBED_DIR and AWARE_TESTBED_BASE_PORT to run beside it"
	fi
	# shellcheck disable=SC2317 # called through the trap
	cleanup() {
		"${ROOT}/hack/node/down.sh" || echo "bench-real.sh: node/down.sh failed" >&2
		"${ROOT}/hack/testbed/down.sh" || echo "bench-real.sh: testbed/down.sh failed" >&2
	}
	trap cleanup EXIT
	"${ROOT}/hack/testbed/up.sh"
	"${ROOT}/hack/node/up.sh"
fi

cd "${ROOT}"
AWARE_NODE_NAME="${NODE_NAME}" AWARE_TESTBED_DIR="${TESTBED_DIR}" \
	go run -tags benchreal ./hack/benchreal \
	--loadgen "${OUT}/bin/loadgen" --rl-agent "${OUT}/bin/rl-agent" --recommender "${OUT}/bin/recommender" --vpa-bin "${VPA_BIN}" --vpa-module-dir "${VPA_DIR}" \
	--repo "${ROOT}" --out "${OUT}" "$@"
