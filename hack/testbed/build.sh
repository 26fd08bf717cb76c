#!/usr/bin/env bash
# Builds (or finds cached) every binary the loopback testbed runs, and prints
# the install directory (which holds bin/ and share/) on stdout.
#
# Kubernetes, etcd, KWOK and metrics-server come from their Go modules;
# Prometheus comes from Debian's package. The result is cached under
# ${AWARE_CACHE:-$HOME/.cache/aware}/testbed/<version-key>, assembled in a
# temporary directory and renamed into place only when complete, so an
# interrupted build never leaves a cache that looks usable.
set -euo pipefail

# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STEP_TIMES=()

# step NAME CMD... runs one build step and records how long it took.
step() {
	local name="$1" start
	shift
	start="$(now)"
	log "step ${name}: start"
	"$@"
	local took
	took="$(elapsed "${start}")"
	STEP_TIMES+=("${name}=${took}s")
	log "step ${name}: done in ${took}s"
}

# first_line CMD...: logs the first line CMD prints. Not `| head -n1`: with
# pipefail, CMD dying of SIGPIPE after head exits would fail the build.
first_line() {
	local out
	out="$("$@" 2>&1)"
	log "$(basename "$1") $2: ${out%%$'\n'*}"
}

cache_complete() {
	local dir="$1" b
	for b in "${TESTBED_BINARIES[@]}"; do
		[[ -x "${dir}/bin/${b}" ]] || return 1
	done
	[[ -f "${dir}/VERSIONS" && -d "${dir}/share/kwok" ]]
}

# module_json MODULE@VERSION -> the JSON `go mod download` prints; fails when
# the proxy cannot serve the module (an Error field), which is how this
# mirror reports versions it does not have.
module_json() {
	local json
	json="$(go_env_clean go mod download -json "$1")" || die "go mod download $1 failed: ${json}"
	if [[ "$(jq -r '.Error // empty' <<<"${json}")" != "" ]]; then
		die "module $1 unusable: $(jq -r .Error <<<"${json}")"
	fi
	printf '%s\n' "${json}"
}

fetch_prometheus() {
	local work="${STAGE}/prometheus-deb"
	mkdir -p "${work}"
	# The sandbox option stops apt from complaining that its _apt user cannot
	# write to our private temp dir.
	local apt_get=(apt-get -q -o APT::Sandbox::User=root download "prometheus=${PROMETHEUS_DEB_VERSION}")
	# stdout is reserved for the install dir that up.sh reads.
	if ! (cd "${work}" && "${apt_get[@]}" >&2); then
		log "apt-get download failed; refreshing package lists and retrying"
		apt-get -q update >&2 || log "apt-get update failed (continuing to retry the download)"
		if ! (cd "${work}" && "${apt_get[@]}" >&2); then
			local candidate
			candidate="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ { print $2 }')"
			die "cannot download prometheus=${PROMETHEUS_DEB_VERSION} from Debian (candidate now: ${candidate:-unknown}); set AWARE_PROMETHEUS_DEB_VERSION to an available version (an apt version, * matches any suffix)"
		fi
	fi
	local deb
	deb="$(find "${work}" -maxdepth 1 -name 'prometheus_*.deb' -print -quit)"
	[[ -n "${deb}" ]] || die "apt-get download produced no prometheus .deb"
	log "prometheus package: $(basename "${deb}")"
	dpkg-deb -x "${deb}" "${work}/root"
	install -m 0755 "${work}/root/usr/bin/prometheus" "${STAGE}/bin/prometheus"
	if [[ -x "${work}/root/usr/bin/promtool" ]]; then
		install -m 0755 "${work}/root/usr/bin/promtool" "${STAGE}/bin/promtool"
	fi
	rm -rf "${work}"
	first_line "${STAGE}/bin/prometheus" --version
}

build_etcd() {
	module_json "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >/dev/null
	local mod="${STAGE}/src/etcd"
	mkdir -p "${mod}"
	# etcd's server go.mod replaces its sibling modules with ../ paths, which
	# `go install MODULE@VERSION` refuses; as a dependency of our own wrapper
	# module its replaces are ignored and its requires name released versions.
	cat >"${mod}/go.mod" <<-EOF
		module aware.local/testbed/etcd

		go 1.26.0

		require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
	EOF
	(cd "${mod}" && go_env_clean go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}")
	(cd "${mod}" && go_env_clean go build -trimpath \
		-ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}" \
		-o "${STAGE}/bin/etcd" go.etcd.io/etcd/server/v3)
	first_line "${STAGE}/bin/etcd" --version
}

build_kube() {
	local json gomod
	json="$(module_json "k8s.io/kubernetes@${KUBE_VERSION}")"
	gomod="$(jq -r .GoMod <<<"${json}")"
	[[ -f "${gomod}" ]] || die "no go.mod for k8s.io/kubernetes at ${gomod}"

	local mod="${STAGE}/src/kube"
	mkdir -p "${mod}"
	local staging
	# Every module upstream points at ./staging/src/... is released on its own
	# at the matching v0 version; a replace for a module outside the build
	# graph is ignored, so taking the whole list is safe.
	staging="$(sed -nE 's#^[[:space:]]*(replace[[:space:]]+)?([^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/src/.*#\2#p' "${gomod}")"
	[[ -n "${staging}" ]] || die "found no staging replaces in ${gomod}"
	log "replacing $(wc -l <<<"${staging}") staging modules with ${KUBE_STAGING_VERSION}"
	{
		printf 'module aware.local/testbed/kube\n\n'
		grep -E '^go [0-9]' "${gomod}" | head -n1
		# Upstream's godebug defaults apply only in its own main module;
		# carrying them over keeps runtime behaviour identical to a release.
		grep -E '^godebug ' "${gomod}" || true
		printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "${KUBE_VERSION}"
		while read -r m; do
			printf '\t%s => %s %s\n' "${m}" "${m}" "${KUBE_STAGING_VERSION}"
		done <<<"${staging}"
		printf ')\n'
	} >"${mod}/go.mod"

	local cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl) pkgs=() c
	for c in "${cmds[@]}"; do
		pkgs+=("k8s.io/kubernetes/cmd/${c}")
	done
	local minor="${KUBE_VERSION#v1.}"
	minor="${minor%%.*}"
	local ldflags="-s -w"
	local p
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X ${p}.gitVersion=${KUBE_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor} -X ${p}.gitTreeState=clean"
	done
	(cd "${mod}" && go_env_clean go get "${pkgs[@]/%/@${KUBE_VERSION}}")
	# One build for all four shares the compile of the common packages.
	(cd "${mod}" && go_env_clean go build -trimpath -ldflags "${ldflags}" -o "${STAGE}/bin/" "${pkgs[@]}")
	first_line "${STAGE}/bin/kube-apiserver" --version
}

# go_install_module MODULE VERSION CMDPKG LDFLAGS: these two modules have no
# local replaces, so a plain `go install pkg@version` works.
go_install_module() {
	local module="$1" version="$2" pkg="$3" ldflags="$4"
	module_json "${module}@${version}" >/dev/null
	GOBIN="${STAGE}/bin" go_env_clean go install -trimpath -ldflags "-s -w ${ldflags}" "${pkg}@${version}"
}

build_kwok() {
	go_install_module sigs.k8s.io/kwok "${KWOK_VERSION}" sigs.k8s.io/kwok/cmd/kwok \
		"-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}"
	first_line "${STAGE}/bin/kwok" --version
}

build_metrics_server() {
	# metrics-server reports its version through client-go's version package.
	local p=k8s.io/client-go/pkg/version
	go_install_module sigs.k8s.io/metrics-server "${METRICS_SERVER_VERSION}" sigs.k8s.io/metrics-server/cmd/metrics-server \
		"-X ${p}.gitVersion=${METRICS_SERVER_VERSION} -X ${p}.gitCommit=unknown -X ${p}.buildDate=1970-01-01T00:00:00Z"
	local v
	v="$("${STAGE}/bin/metrics-server" --version 2>&1)"
	log "metrics-server --version: ${v}"
	[[ "${v}" == *"${METRICS_SERVER_VERSION}"* ]] || die "metrics-server does not report ${METRICS_SERVER_VERSION}"
}

# KWOK ships its stages and the resource-metrics Metric as YAML in its module,
# not inside the binary; copy them into the cache so up.sh does not depend on
# the module cache still holding them.
copy_kwok_manifests() {
	local dir
	dir="$(jq -r .Dir <<<"$(module_json "sigs.k8s.io/kwok@${KWOK_VERSION}")")"
	local dest="${STAGE}/share/kwok"
	mkdir -p "${dest}/stage" "${dest}/metrics"
	local f
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		[[ -f "${dir}/kustomize/stage/${f}" ]] || die "kwok module lacks kustomize/stage/${f}"
		install -m 0644 "${dir}/kustomize/stage/${f}" "${dest}/stage/$(basename "${f}")"
	done
	install -m 0644 "${dir}/kustomize/metrics/resource/metrics-resource.yaml" "${dest}/metrics/metrics-resource.yaml"
}

main() {
	local install
	install="$(testbed_install_dir)"
	if cache_complete "${install}"; then
		log "testbed binaries cached in ${install} (0 work)"
		printf '%s\n' "${install}"
		return 0
	fi

	local root
	root="$(testbed_cache_root)"
	mkdir -p "${root}"
	# Two builds at once (make e2e in two shells) would each spend ten minutes
	# of both cores; the second waits and then finds the first one's result.
	exec 9>"${root}/.build.lock"
	if ! flock -n 9; then
		log "another testbed build holds ${root}/.build.lock; waiting"
		flock 9
	fi
	if cache_complete "${install}"; then
		log "testbed binaries cached in ${install} (built by a concurrent run)"
		printf '%s\n' "${install}"
		return 0
	fi

	# Holding the lock, any staging dir left is from a build that was killed
	# too hard to clean up after itself.
	rm -rf "${root}"/.build-*
	local total_start
	total_start="$(now)"
	STAGE="$(mktemp -d "${root}/.build-XXXXXX")"
	trap 'rm -rf "${STAGE}"' EXIT
	mkdir -p "${STAGE}/bin"
	log "building testbed binaries into ${STAGE} (key $(testbed_version_key))"

	# Cheapest and most likely to need outside help first, so a problem shows
	# up before ten minutes of compiling.
	step prometheus fetch_prometheus
	step kwok-manifests copy_kwok_manifests
	step etcd build_etcd
	step kube build_kube
	step kwok build_kwok
	step metrics-server build_metrics_server

	rm -rf "${STAGE}/src"
	{
		printf 'kube %s\netcd %s\nkwok %s\nmetrics-server %s\nprometheus-deb %s\n' \
			"${KUBE_VERSION}" "${ETCD_VERSION}" "${KWOK_VERSION}" "${METRICS_SERVER_VERSION}" "${PROMETHEUS_DEB_VERSION}"
		printf 'built-with %s\n' "$(go env GOVERSION)"
	} >"${STAGE}/VERSIONS"
	cache_complete "${STAGE}" || die "build finished but ${STAGE} is incomplete"

	rm -rf "${install}"
	# -T: fail rather than move the staging dir *into* an existing directory.
	mv -T "${STAGE}" "${install}"
	trap - EXIT
	log "step timings: ${STEP_TIMES[*]}"
	log "testbed binaries built in $(elapsed "${total_start}")s; cached in ${install} ($(du -sh "${install}" | cut -f1))"
	printf '%s\n' "${install}"
}

main "$@"
