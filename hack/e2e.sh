#!/usr/bin/env bash
# Runs the end-to-end tests against a fresh loopback testbed: up.sh, then
# `go test -tags e2e ./e2e/...`, then down.sh whatever happened, exiting with
# the tests' status. Extra arguments go to `go test` (e.g. -run TestTestbedSmoke).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTBED="${ROOT}/hack/testbed"

# The trap is set before up.sh so that even a half-started testbed is torn
# down (up.sh cleans up after itself too; down.sh is idempotent).
# shellcheck disable=SC2317 # called through the trap
cleanup() {
	"${TESTBED}/down.sh" || echo "e2e.sh: down.sh failed" >&2
}
trap cleanup EXIT

"${TESTBED}/up.sh"

# shellcheck disable=SC1091 # written by up.sh at run time
source "${AWARE_TESTBED_DIR:-/tmp/aware-testbed}/env"

rc=0
(cd "${ROOT}" && go test -tags e2e -count=1 -timeout "${AWARE_E2E_TIMEOUT:-30m}" "$@" ./e2e/...) || rc=$?
if ((rc != 0)); then
	echo "e2e.sh: go test failed with exit code ${rc}; control-plane logs are in ${AWARE_TESTBED_DIR}/logs" >&2
fi
exit "${rc}"
