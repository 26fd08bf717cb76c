#!/usr/bin/env bash
# Builds (or finds cached) a kubelet from the k8s.io/kubernetes module at the
# testbed's Kubernetes version, and prints its path on stdout.
#
# Same recipe as the testbed's control plane (hack/testbed/build.sh): a
# wrapper module requiring k8s.io/kubernetes with every staging module
# replaced by its released v0 version. Cached under
# ${AWARE_CACHE:-$HOME/.cache/aware}/kubelet/<key>/kubelet; built in a
# temporary directory and renamed into place only when complete.
set -euo pipefail

# shellcheck source=../testbed/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../testbed/lib.sh"

KUBELET_RECIPE=1

kubelet_install_dir() {
	printf '%s/kubelet/kube-%s_%s-%s_r%s\n' "${AWARE_CACHE:-${HOME}/.cache/aware}" \
		"${KUBE_VERSION}" "$(go env GOOS)" "$(go env GOARCH)" "${KUBELET_RECIPE}"
}

main() {
	local install
	install="$(kubelet_install_dir)"
	if [[ -x "${install}/kubelet" ]]; then
		log "kubelet cached in ${install} (0 work)"
		printf '%s\n' "${install}/kubelet"
		return 0
	fi
	local root
	root="$(dirname "${install}")"
	mkdir -p "${root}"
	exec 9>"${root}/.build.lock"
	if ! flock -n 9; then
		log "another kubelet build holds ${root}/.build.lock; waiting"
		flock 9
	fi
	if [[ -x "${install}/kubelet" ]]; then
		printf '%s\n' "${install}/kubelet"
		return 0
	fi
	rm -rf "${root}"/.build-*
	local start stage
	start="$(now)"
	stage="$(mktemp -d "${root}/.build-XXXXXX")"
	# shellcheck disable=SC2064 # expand now: stage is local
	trap "rm -rf '${stage}'" EXIT

	local json gomod
	json="$(go_env_clean go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}")" ||
		die "go mod download k8s.io/kubernetes@${KUBE_VERSION} failed: ${json}"
	[[ -z "$(jq -r '.Error // empty' <<<"${json}")" ]] || die "k8s.io/kubernetes@${KUBE_VERSION}: $(jq -r .Error <<<"${json}")"
	gomod="$(jq -r .GoMod <<<"${json}")"

	local mod="${stage}/src" staging
	mkdir -p "${mod}"
	staging="$(sed -nE 's#^[[:space:]]*(replace[[:space:]]+)?([^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/src/.*#\2#p' "${gomod}")"
	[[ -n "${staging}" ]] || die "found no staging replaces in ${gomod}"
	{
		printf 'module aware.local/node/kubelet\n\n'
		grep -E '^go [0-9]' "${gomod}" | head -n1
		grep -E '^godebug ' "${gomod}" || true
		printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "${KUBE_VERSION}"
		while read -r m; do
			printf '\t%s => %s %s\n' "${m}" "${m}" "${KUBE_STAGING_VERSION}"
		done <<<"${staging}"
		printf ')\n'
	} >"${mod}/go.mod"

	local minor="${KUBE_VERSION#v1.}" ldflags="-s -w" p
	minor="${minor%%.*}"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${p}.gitVersion=${KUBE_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor} -X ${p}.gitTreeState=clean"
	done
	(cd "${mod}" && go_env_clean go get "k8s.io/kubernetes/cmd/kubelet@${KUBE_VERSION}")
	(cd "${mod}" && go_env_clean go build -trimpath -ldflags "${ldflags}" -o "${stage}/kubelet" k8s.io/kubernetes/cmd/kubelet)
	log "kubelet --version: $("${stage}/kubelet" --version 2>&1)"
	rm -rf "${mod}"
	rm -rf "${install}"
	mv -T "${stage}" "${install}"
	trap - EXIT
	log "kubelet built in $(elapsed "${start}")s; cached in ${install}"
	printf '%s\n' "${install}/kubelet"
}

main "$@"
