# shellcheck shell=bash
# The variables are used by the scripts that source this file.
# shellcheck disable=SC2034
# Shared settings and helpers for the loopback testbed scripts; sourced, never run.
#
# Every knob is an environment variable with a default, so CI, make and a
# developer's shell all get the same layout without flags.

# Versions of what build.sh builds. Changing any of them changes the cache key,
# so an old cache is never mistaken for a new one.
KUBE_VERSION="${AWARE_KUBE_VERSION:-v1.36.3}"
# The staging modules (k8s.io/api, k8s.io/apiserver, ...) are released as
# v0.<minor>.<patch> alongside k8s.io/kubernetes v1.<minor>.<patch>.
KUBE_STAGING_VERSION="v0${KUBE_VERSION#v1}"
ETCD_VERSION="${AWARE_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${AWARE_KWOK_VERSION:-v0.8.0}"
METRICS_SERVER_VERSION="${AWARE_METRICS_SERVER_VERSION:-v0.9.0}"
# An apt version pattern: the upstream release and Debian revision are
# pinned, the stable-update suffix is not (Debian replaces a point release's
# build, e.g. +b6 by +deb12u1, and serves only the newest, so an exact pin
# breaks on a fresh machine). build.sh logs the exact version it took.
PROMETHEUS_DEB_VERSION="${AWARE_PROMETHEUS_DEB_VERSION:-2.42.0+ds-5*}"
# Bump when the way the binaries are built changes (flags, layout), so caches
# made by an older recipe are not reused.
TESTBED_RECIPE=2

TESTBED_BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok metrics-server prometheus)

testbed_cache_root() {
	printf '%s/testbed\n' "${AWARE_CACHE:-${HOME}/.cache/aware}"
}

testbed_version_key() {
	local goos goarch
	goos="$(go env GOOS)"
	goarch="$(go env GOARCH)"
	printf 'kube-%s_etcd-%s_kwok-%s_metrics-server-%s_prometheus-%s_%s-%s_r%s\n' \
		"${KUBE_VERSION}" "${ETCD_VERSION}" "${KWOK_VERSION}" "${METRICS_SERVER_VERSION}" \
		"${PROMETHEUS_DEB_VERSION//\*/x}" "${goos}" "${goarch}" "${TESTBED_RECIPE}"
}

testbed_install_dir() {
	printf '%s/%s\n' "$(testbed_cache_root)" "$(testbed_version_key)"
}

# Runtime layout. The defaults keep every port below the kernel's ephemeral
# range (32768+) so an outgoing connection can never have taken one of them.
TESTBED_DIR="${AWARE_TESTBED_DIR:-/tmp/aware-testbed}"
BASE_PORT="${AWARE_TESTBED_BASE_PORT:-17400}"
NODE_COUNT="${AWARE_TESTBED_NODES:-1}"
NODE_CPU="${AWARE_TESTBED_NODE_CPU:-8}"
NODE_MEMORY="${AWARE_TESTBED_NODE_MEMORY:-32Gi}"
NODE_PODS="${AWARE_TESTBED_NODE_PODS:-110}"
EMULATOR_ADDR="${AWARE_EMULATOR_ADDR:-127.0.0.1:9400}"
# Client QPS of kube-controller-manager and kube-scheduler; empty keeps their
# defaults (20 and 50). Raised for scale runs (make bench-vpa), where the
# ReplicaSet controller and the scheduler would otherwise create and bind
# thousands of pods at 20 and 50 per second.
CLIENT_QPS="${AWARE_TESTBED_CLIENT_QPS:-}"
# How often Prometheus scrapes each fake node's kubelet metrics from KWOK.
# KWOK renders every pod's series on each scrape (0.1-0.2 ms of CPU per pod
# here), so at thousands of pods the default 5 s costs a good part of a core;
# scale runs that do not read Prometheus (make bench-vpa) set it longer.
KUBELET_SCRAPE_INTERVAL="${AWARE_TESTBED_KUBELET_SCRAPE_INTERVAL:-5s}"
# KWOK's pod stage workers (kwok.sh: write_kwok_config says why not its 4).
KWOK_POD_WORKERS="${AWARE_TESTBED_KWOK_POD_WORKERS:-32}"
READY_TIMEOUT="${AWARE_TESTBED_TIMEOUT:-180}"

ETCD_PORT=$((BASE_PORT + 0))
ETCD_PEER_PORT=$((BASE_PORT + 1))
APISERVER_PORT=$((BASE_PORT + 2))
KCM_PORT=$((BASE_PORT + 3))
SCHEDULER_PORT=$((BASE_PORT + 4))
KWOK_PORT=$((BASE_PORT + 5))
METRICS_SERVER_PORT=$((BASE_PORT + 6))
PROMETHEUS_PORT=$((BASE_PORT + 7))
TESTBED_PORTS=("${ETCD_PORT}" "${ETCD_PEER_PORT}" "${APISERVER_PORT}" "${KCM_PORT}" "${SCHEDULER_PORT}"
	"${KWOK_PORT}" "${METRICS_SERVER_PORT}" "${PROMETHEUS_PORT}")

# Order matters: down.sh stops in reverse so that nothing loses its apiserver
# or etcd while still running.
TESTBED_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server prometheus)

log() {
	printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

# on_err reports the command that made a `set -e` script stop; otherwise a
# failure deep in a helper ends the script without a word.
on_err() {
	log "failed (exit $1) at ${BASH_SOURCE[1]}:$2: $3"
}
set -o errtrace
trap 'on_err $? ${LINENO} "${BASH_COMMAND}"' ERR

die() {
	log "ERROR: $*"
	exit 1
}

now() {
	date +%s.%N
}

# elapsed START -> seconds since START with one decimal.
elapsed() {
	awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'
}

# go_env_clean runs a command with the environment a module build outside our
# own module needs: no workspace, and no -mod= from GOFLAGS (it would apply to
# a go.mod that is not ours).
go_env_clean() {
	local flags=() f
	for f in ${GOFLAGS:-}; do
		[[ "${f}" == -mod=* ]] || flags+=("${f}")
	done
	GOWORK=off GOFLAGS="${flags[*]:-}" CGO_ENABLED=0 "$@"
}

# running_component: prints "NAME PID" of the first component whose PID file in
# ${TESTBED_DIR} names a live process, and fails if none does. up.sh refuses
# to start over such a testbed; e2e.sh refuses to run (and so to stop) one it
# did not start.
running_component() {
	local pids="${TESTBED_DIR}/pids" f pid
	[[ -d "${pids}" ]] || return 1
	for f in "${pids}"/*.pid; do
		[[ -f "${f}" ]] || continue
		pid="$(cat "${f}")"
		if pid_alive "${pid}"; then
			printf '%s %s\n' "$(basename "${f}" .pid)" "${pid}"
			return 0
		fi
	done
	return 1
}

# pid_alive PID: a zombie counts as gone; it is what a component stopped by
# down.sh from within up.sh (its parent) looks like until up.sh exits.
pid_alive() {
	local pid="$1" state
	[[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null || return 1
	state="$(awk '{ print $3 }' "/proc/${pid}/stat" 2>/dev/null)" || return 1
	[[ "${state}" != Z ]]
}
