#!/usr/bin/env bash
# Builds VPA's recommender, updater and admission-controller from the Go
# module proxy at the version pinned in hack/vpa/go.mod (through that
# wrapper module), or finds them cached in
# ${AWARE_CACHE:-$HOME/.cache/aware}/vpa/<version>_<os>-<arch>/bin.
# Prints three lines: the version, the bin directory and the module's source
# directory (its deploy/ holds the CRDs). make bench-vpa and make bench-real
# use it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${AWARE_CACHE:-${HOME}/.cache/aware}"
VPA_MODULE=k8s.io/autoscaler/vertical-pod-autoscaler

die() {
	echo "vpa/build.sh: $*" >&2
	exit 1
}

# The wrapper module's builds must not see a workspace or -mod flags.
vpa_go() { (cd "${ROOT}/hack/vpa" && GOWORK=off GOFLAGS= go "$@"); }

VPA_VERSION="$(vpa_go list -m -f '{{.Version}}' "${VPA_MODULE}")" || die "cannot resolve ${VPA_MODULE} in hack/vpa/go.mod"
VPA_DIR="$(vpa_go list -m -f '{{.Dir}}' "${VPA_MODULE}")"
if [[ -z "${VPA_DIR}" ]]; then
	vpa_go mod download "${VPA_MODULE}" >&2
	VPA_DIR="$(vpa_go list -m -f '{{.Dir}}' "${VPA_MODULE}")"
fi
[[ -d "${VPA_DIR}" ]] || die "no source directory for ${VPA_MODULE} ${VPA_VERSION}"
VPA_BIN="${CACHE}/vpa/${VPA_VERSION}_$(go env GOOS)-$(go env GOARCH)/bin"

if [[ -x "${VPA_BIN}/recommender" && -x "${VPA_BIN}/updater" && -x "${VPA_BIN}/admission-controller" ]]; then
	echo "vpa/build.sh: VPA ${VPA_VERSION} binaries cached in ${VPA_BIN}" >&2
else
	echo "vpa/build.sh: building VPA ${VPA_VERSION} from the Go module proxy (a few minutes on 2 cores)" >&2
	mkdir -p "${CACHE}"
	tmp="$(mktemp -d "${CACHE}/vpa-build.XXXXXX")"
	start=${SECONDS}
	vpa_go build -trimpath -ldflags '-s -w' -o "${tmp}/" \
		"${VPA_MODULE}/pkg/recommender" "${VPA_MODULE}/pkg/updater" "${VPA_MODULE}/pkg/admission-controller" >&2 ||
		{ rm -rf "${tmp}"; die "building VPA ${VPA_VERSION} failed (see above)"; }
	mkdir -p "$(dirname "${VPA_BIN}")"
	rm -rf "${VPA_BIN}"
	mv "${tmp}" "${VPA_BIN}"
	echo "vpa/build.sh: built VPA in $((SECONDS - start)) s into ${VPA_BIN}" >&2
fi
printf '%s\n%s\n%s\n' "${VPA_VERSION}" "${VPA_BIN}" "${VPA_DIR}"
