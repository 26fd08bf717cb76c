#!/usr/bin/env bash
# Side-by-side benchmark of AWARE and the Vertical Pod Autoscaler on the
# loopback control plane (make bench-vpa; docs/results/performance.md).
#
#  1. Builds VPA's recommender, updater and admission-controller from the Go
#     module proxy at the version pinned in hack/vpa/go.mod, through that
#     wrapper module, and caches them in
#     ${AWARE_CACHE:-$HOME/.cache/aware}/vpa/<version>_<os>-<arch>/bin.
#  2. Builds our three components.
#  3. Starts a testbed sized for the largest scale (hack/testbed/up.sh) and
#     stops it at the end, or, with BENCH_VPA_USE_RUNNING=1, uses the one
#     already running from $AWARE_TESTBED_DIR (and leaves it running).
#  4. Runs the harness (go run -tags benchvpa ./hack/benchvpa), which prints
#     the ratio tables and writes results.md, results.json, the SVG plot and
#     every component's log into $BENCH_VPA_OUT (default bench-vpa-out/).
#
# Extra arguments go to the harness, e.g. --scales 100,1000 --aware-only-scale 0
# (go run -tags benchvpa ./hack/benchvpa -h lists them). It is slow (tens of
# minutes at the default scales) and is not part of make check.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${BENCH_VPA_OUT:-${ROOT}/bench-vpa-out}"
die() {
	echo "bench-vpa.sh: $*" >&2
	exit 1
}

vpa="$("${ROOT}/hack/vpa/build.sh")" || die "building VPA failed (see above)"
{ read -r VPA_VERSION; read -r VPA_BIN; read -r VPA_DIR; } <<<"${vpa}"
echo "bench-vpa.sh: VPA ${VPA_VERSION}" >&2

mkdir -p "${OUT}/bin"
# Built as make build does (and VPA's are): trimmed paths, stripped, and
# without gRPC's request tracing (-tags grpcnotrace, see the Makefile).
(cd "${ROOT}" && go build -trimpath -tags grpcnotrace -ldflags '-s -w' -o "${OUT}/bin/" ./recommender ./updater ./admission-controller)

# shellcheck source=testbed/lib.sh
source "${ROOT}/hack/testbed/lib.sh"
if [[ "${BENCH_VPA_USE_RUNNING:-0}" == 1 ]]; then
	running_component >/dev/null || die "BENCH_VPA_USE_RUNNING=1 but no testbed runs from ${TESTBED_DIR}"
else
	if running="$(running_component)"; then
		die "a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }): set BENCH_VPA_USE_RUNNING=1 to use it, or AWARE_TESTBED_DIR and AWARE_TESTBED_BASE_PORT to run beside it"
	fi
	# Room for the largest scale: 15,000 pods by default (5,000 targets of
	# two one-pod Deployments, then 5,000 more MPA Deployments).
	export AWARE_TESTBED_NODES="${AWARE_TESTBED_NODES:-10}"
	export AWARE_TESTBED_NODE_PODS="${AWARE_TESTBED_NODE_PODS:-2500}"
	export AWARE_TESTBED_NODE_CPU="${AWARE_TESTBED_NODE_CPU:-1000}"
	export AWARE_TESTBED_NODE_MEMORY="${AWARE_TESTBED_NODE_MEMORY:-4Ti}"
	export AWARE_TESTBED_CLIENT_QPS="${AWARE_TESTBED_CLIENT_QPS:-200}"
	# Neither side reads Prometheus; its scrapes of KWOK cost CPU per pod.
	export AWARE_TESTBED_KUBELET_SCRAPE_INTERVAL="${AWARE_TESTBED_KUBELET_SCRAPE_INTERVAL:-1m}"
	# shellcheck disable=SC2317 # called through the trap
	cleanup() { "${ROOT}/hack/testbed/down.sh" || echo "bench-vpa.sh: down.sh failed" >&2; }
	trap cleanup EXIT
	"${ROOT}/hack/testbed/up.sh"
fi
# shellcheck disable=SC1091 # written by up.sh at run time
source "${TESTBED_DIR}/env"

cd "${ROOT}"
go run -tags benchvpa ./hack/benchvpa \
	--aware-bin "${OUT}/bin" --vpa-bin "${VPA_BIN}" --vpa-module-dir "${VPA_DIR}" \
	--repo "${ROOT}" --out "${OUT}" "$@"
