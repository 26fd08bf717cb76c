#!/usr/bin/env bash
# The real-node tier (make e2e-node): a fresh loopback testbed, a real node
# joined to it (hack/node/up.sh: Debian's containerd and runc, a kubelet
# built from the Kubernetes module, the images of `make images` imported),
# then `go test -tags e2enode ./e2e/node/...`, which runs the install from
# deploy/ as pods; the node and the testbed are stopped whatever happened.
# Needs root. Not part of make e2e or CI's default run.
#
#   AWARE_IMAGES_TAG=TAG hack/e2e-node.sh [go test args]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTBED="${ROOT}/hack/testbed"
# shellcheck source=node/lib.sh
source "${ROOT}/hack/node/lib.sh"

[[ -n "${AWARE_IMAGES_TAG:-}" ]] || die "set AWARE_IMAGES_TAG to the tag make images gave bin/images/aware-* (make e2e-node does)"
if running="$(running_component)"; then
	die "a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }); e2e-node.sh stops only one it started: set AWARE_TESTBED_DIR and AWARE_TESTBED_BASE_PORT to run beside it"
fi

# shellcheck disable=SC2317 # called through the trap
cleanup() {
	"${ROOT}/hack/node/down.sh" || echo "e2e-node.sh: node/down.sh failed" >&2
	"${TESTBED}/down.sh" || echo "e2e-node.sh: testbed/down.sh failed" >&2
}
trap cleanup EXIT

"${TESTBED}/up.sh"
"${ROOT}/hack/node/up.sh"

rc=0
(cd "${ROOT}" && AWARE_NODE_NAME="${NODE_NAME}" AWARE_TESTBED_DIR="${TESTBED_DIR}" \
	go test -tags e2enode -count=1 -timeout "${AWARE_E2E_TIMEOUT:-20m}" -v "$@" ./e2e/node/...) || rc=$?
if ((rc != 0)); then
	echo "e2e-node.sh: go test failed with exit code ${rc}; logs in ${TESTBED_DIR}/logs and ${NODE_LOGS}" >&2
fi
exit "${rc}"
