#!/usr/bin/env bash
# Runs the end-to-end tests against a fresh loopback testbed: up.sh, then
# `go test -tags e2e ./e2e/...`, then down.sh whatever happened, exiting with
# the tests' status. Extra arguments go to `go test` (e.g. -run TestTestbedSmoke).
#
# It stops only a testbed it started itself: if one is already running from
# ${AWARE_TESTBED_DIR}, it refuses and leaves it alone. To run the tests
# against a testbed you started, source its env and run go test directly.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTBED="${ROOT}/hack/testbed"
# shellcheck source=testbed/lib.sh
source "${TESTBED}/lib.sh"

if running="$(running_component)"; then
	die "a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }), and e2e.sh stops only one it started: run hack/testbed/down.sh, set AWARE_TESTBED_DIR and AWARE_TESTBED_BASE_PORT to run beside it, or run against it with: source ${TESTBED_DIR}/env && go test -tags e2e ./e2e/..."
fi

# The install tests render the Helm chart with the pinned helm (built once,
# then cached by go build).
# shellcheck source=tools.sh
source "${ROOT}/hack/tools.sh"
aware::tools::build_deploy
export AWARE_HELM="${TOOLS_BIN}/helm"

# The trap is set before up.sh so that even a half-started testbed is torn
# down (up.sh cleans up after itself too; down.sh is idempotent). From here on
# the testbed in ${TESTBED_DIR} is this script's own.
# shellcheck disable=SC2317 # called through the trap
cleanup() {
	"${TESTBED}/down.sh" || echo "e2e.sh: down.sh failed" >&2
}
trap cleanup EXIT

"${TESTBED}/up.sh"

# shellcheck disable=SC1091 # written by up.sh at run time
source "${TESTBED_DIR}/env"

rc=0
e2e_test() {
	(cd "${ROOT}" && go test -tags e2e -count=1 -timeout "${AWARE_E2E_TIMEOUT:-40m}" "$@")
}
if (($# > 0)); then
	e2e_test "$@" ./e2e/... || rc=$?
else
	# TestControlPlaneFaults restarts kube-apiserver and etcd and stops
	# metrics-server and Prometheus. It runs last, on its own, so that
	# whatever a fault leaves behind can harm no other test (it also
	# checks and repairs the control plane at its end: docs/faults.md).
	e2e_test -skip '^TestControlPlaneFaults$' ./e2e/... || rc=$?
	e2e_test -run '^TestControlPlaneFaults$' ./e2e/ || rc=$?
fi
if ((rc != 0)); then
	echo "e2e.sh: go test failed with exit code ${rc}; control-plane logs are in ${TESTBED_DIR}/logs" >&2
fi
exit "${rc}"
