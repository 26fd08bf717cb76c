#!/usr/bin/env bash
# Records the upgrade fixture of a version: `make upgrade-fixture VERSION=vX.Y.Z [REF=...]`.
#
#   hack/upgrade-fixture.sh VERSION [REF]
#
# It exports REF (default: the tag VERSION if it exists, else HEAD) into a
# temporary directory (git archive), copies this tree's recorder into it
# (e2e/upgrade_record_test.go and e2e/upgrade_fixture_test.go), and runs
# TestRecordUpgradeFixture there, against the loopback testbed: REF's
# components train an agent until one autoscaler is Serving and another
# Bootstrapping, then the agent's state directory and the custom resources
# as etcd stores them are written to e2e/testdata/upgrade/VERSION/ of this
# tree, with a manifest.json naming REF's commit. TestUpgrade (e2e) installs
# every fixture there under the current tree (docs/operations.md,
# "Compatibility").
#
# It uses the testbed running from ${AWARE_TESTBED_DIR} if there is one,
# and otherwise starts one and stops it at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTBED="${ROOT}/hack/testbed"
# shellcheck source=testbed/lib.sh
source "${TESTBED}/lib.sh"

(($# >= 1 && $# <= 2)) || die "usage: $0 VERSION [REF]"
VERSION="$1"
[[ "${VERSION}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "VERSION ${VERSION}: want vMAJOR.MINOR.PATCH[-prerelease]"
if (($# == 2)); then
	REF="$2"
elif git -C "${ROOT}" rev-parse -q --verify "refs/tags/${VERSION}" >/dev/null; then
	REF="${VERSION}"
else
	REF=HEAD
fi
COMMIT="$(git -C "${ROOT}" rev-parse --verify "${REF}^{commit}")" || die "REF ${REF} is not a commit"
OUT="${ROOT}/e2e/testdata/upgrade/${VERSION}"

WORK="$(mktemp -d)"
own_testbed=false
# shellcheck disable=SC2317 # called through the trap
cleanup() {
	rm -rf "${WORK}"
	if "${own_testbed}"; then
		"${TESTBED}/down.sh" || echo "upgrade-fixture: down.sh failed" >&2
	fi
}
trap cleanup EXIT

mkdir "${WORK}/src"
git -C "${ROOT}" archive "${COMMIT}" | tar -x -C "${WORK}/src"
cp "${ROOT}/e2e/upgrade_record_test.go" "${ROOT}/e2e/upgrade_fixture_test.go" "${WORK}/src/e2e/"

if ! running_component >/dev/null; then
	own_testbed=true
	"${TESTBED}/up.sh"
fi
# shellcheck disable=SC1091 # written by up.sh at run time
source "${TESTBED_DIR}/env"

echo "upgrade-fixture: recording ${VERSION} from ${REF} (${COMMIT}) into ${OUT}"
(cd "${WORK}/src" && AWARE_UPGRADE_FIXTURE_OUT="${OUT}" AWARE_UPGRADE_FIXTURE_VERSION="${VERSION}" AWARE_UPGRADE_FIXTURE_COMMIT="${COMMIT}" \
	go test -tags 'e2e upgraderecord' -count=1 -timeout 20m -run '^TestRecordUpgradeFixture$' -v ./e2e/)
echo "upgrade-fixture: wrote ${OUT}"
