#!/usr/bin/env bash
# Joins a real node to a running loopback testbed (hack/testbed/up.sh):
# Debian's containerd and runc, a kubelet built from the Kubernetes module at
# the testbed's version (build-kubelet.sh), and the OCI layouts of
# `make images` imported into containerd, so that pods really run.
#
#   hack/node/up.sh [IMAGE_LAYOUT_DIR...]   default: every bin/images/aware-*
#
# State under ${AWARE_TESTBED_DIR}/node; stop with hack/node/down.sh. Needs
# root (the kubelet and containerd manage cgroups and mounts). The node has
# no pod network: containerd's CNI config is the loopback plugin alone, which
# is enough for the node to be Ready but gives a pod no address besides lo,
# so only hostNetwork pods run (the components reach the apiserver on
# 127.0.0.1; nothing here may talk to any other address).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "${HERE}/lib.sh"

READY_DEADLINE=$((SECONDS + READY_TIMEOUT))
UP_OK=0

on_exit() {
	local rc=$?
	[[ "${UP_OK}" == 1 ]] && return
	((rc != 0)) || rc=1
	log "node start FAILED (exit ${rc}); stopping what was started and keeping ${NODE_LOGS}"
	local f
	for f in "${NODE_LOGS}"/*.log; do
		[[ -f "${f}" ]] || continue
		printf '\n===== tail -n 30 %s =====\n' "${f}" >&2
		tail -n 30 "${f}" >&2 || true
	done
	"${HERE}/down.sh" || true
	exit "${rc}"
}

# install_packages: the pattern of hack/install-deps.sh: check each package
# by name in dpkg's status, install what is missing, check again.
install_packages() {
	local missing=() entry
	for entry in "${NODE_DEB_PACKAGES[@]}"; do
		[[ "$(dpkg-query -W -f='${db:Status-Status}' "${entry%%:*}" 2>/dev/null)" == installed ]] ||
			missing+=("${entry%%:*}")
	done
	((${#missing[@]} == 0)) && return 0
	log "installing Debian packages: ${missing[*]}"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
	for entry in "${missing[@]}"; do
		[[ "$(dpkg-query -W -f='${db:Status-Status}' "${entry}" 2>/dev/null)" == installed ]] ||
			die "Debian package ${entry} is still not installed"
	done
}

preflight() {
	[[ "$(id -u)" == 0 ]] || die "the node needs root (cgroups, mounts, namespaces)"
	[[ -f "${TESTBED_DIR}/env" ]] && running_component >/dev/null ||
		die "no testbed runs from ${TESTBED_DIR}: start hack/testbed/up.sh first"
	local name pid
	for name in "${NODE_COMPONENTS[@]}"; do
		if [[ -s "${NODE_PIDS}/${name}.pid" ]] && node_ours "${name}" "$(cat "${NODE_PIDS}/${name}.pid")"; then
			die "a node already runs from ${NODE_DIR} (${name}); run hack/node/down.sh first"
		fi
	done
	for pid in "${KUBELET_PORT}" "${KUBELET_HEALTHZ_PORT}"; do
		[[ -z "$(ss -Htln "sport = :${pid}" 2>/dev/null)" ]] || die "port ${pid} is in use"
	done
}

# start NAME -- CMD...: in its own session, PID and start time recorded.
start() {
	local name="$1"
	shift 2
	local pidfile="${NODE_PIDS}/${name}.pid"
	log "starting ${name}"
	# shellcheck disable=SC2016 # expanded by the child shell, on purpose
	setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "${pidfile}" "$@" \
		>"${NODE_LOGS}/${name}.log" 2>&1 </dev/null &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "${pidfile}" ]] && break
		sleep 0.05
	done
	[[ -s "${pidfile}" ]] || die "${name} did not write ${pidfile}"
	awk '{ print $22 }' "/proc/$(cat "${pidfile}")/stat" >"${NODE_PIDS}/${name}.start" 2>/dev/null || true
}

# wait_for NAME CMD...: polls CMD until it succeeds, NAME dies or time is up.
wait_for() {
	local name="$1" t0
	shift
	t0="$(now)"
	until "$@" >/dev/null 2>&1; do
		node_ours "${name}" "$(cat "${NODE_PIDS}/${name}.pid")" || die "${name} exited (see ${NODE_LOGS}/${name}.log)"
		((SECONDS < READY_DEADLINE)) || die "${name} not ready after ${READY_TIMEOUT}s (see ${NODE_LOGS}/${name}.log)"
		sleep 1
	done
	log "${name} ready ($(elapsed "${t0}")s)"
}

start_containerd() {
	local conf="${NODE_DIR}/config"
	mkdir -p "${conf}/cni" "${NODE_DIR}/containerd-root" "${NODE_DIR}/containerd-state"
	# The loopback plugin alone: see the header.
	cat >"${conf}/cni/10-loopback.conflist" <<-EOF
		{"cniVersion": "0.4.0", "name": "aware-node-lo", "plugins": [{"type": "loopback"}]}
	EOF
	cat >"${conf}/containerd.toml" <<-EOF
		version = 2
		root = "${NODE_DIR}/containerd-root"
		state = "${NODE_DIR}/containerd-state"
		[grpc]
		  address = "${CONTAINERD_SOCK}"
		[ttrpc]
		  address = "${CONTAINERD_SOCK}.ttrpc"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "${PAUSE_IMAGE}"
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  disable_apparmor = true
		  # Root here lacks CAP_SYS_RESOURCE, so runc cannot lower a
		  # container's oom_score_adj below its own (the sandbox asks for
		  # -998): "nsexec: failed to update /proc/self/oom_score_adj:
		  # Permission denied". This clamps the score to ours instead.
		  restrict_oom_score_adj = true
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "${conf}/cni"
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
	EOF
	start containerd -- containerd --config "${conf}/containerd.toml"
	wait_for containerd ctr --address "${CONTAINERD_SOCK}" version
}

# build_pause: containerd needs a sandbox ("pause") image; the usual one is
# in a registry this machine cannot reach, so it is built here like the
# components' images.
build_pause() {
	local bin="${NODE_DIR}/pause-bin"
	mkdir -p "${bin}"
	(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w -buildid=' -o "${bin}/pause" ./hack/node/pause)
	(cd "${ROOT}" && go run ./hack/images build --binaries "${bin}" --out "${NODE_DIR}/images" --tag node \
		--version node --revision "$(git rev-parse HEAD 2>/dev/null || echo unknown)" --source local \
		--epoch 0 --arch "$(go env GOARCH)" pause) >&2
}

# import_layout DIR: an OCI layout (make images) into containerd, named as a
# kubelet asks for it: aware-X:TAG is docker.io/library/aware-X:TAG to the CRI.
import_layout() {
	local dir="$1" name tag
	name="$(basename "${dir}")"
	tag="$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"] // empty' "${dir}/index.json")"
	[[ -n "${tag}" ]] || die "${dir}/index.json names no tag"
	tar -C "${dir}" -cf "${NODE_DIR}/import.tar" .
	node_ctr images import --base-name "docker.io/library/${name}" "${NODE_DIR}/import.tar" >&2
	rm -f "${NODE_DIR}/import.tar"
	local listed
	# Not `| grep -q`: with pipefail, ctr dying of SIGPIPE after grep exits
	# would fail the check.
	listed="$(node_ctr images ls -q)"
	grep -qx "docker.io/library/${name}:${tag}" <<<"${listed}" ||
		die "containerd does not list docker.io/library/${name}:${tag} after the import"
	log "imported ${name}:${tag}"
}

write_kubelet_config() {
	local certs="${TESTBED_DIR}/certs" conf="${NODE_DIR}/config"
	# The node's client identity (Node authorizer: system:node:NAME in
	# system:nodes) and its serving cert (the apiserver checks it against
	# the testbed CA), both from the testbed CA.
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "${conf}/kubelet.key" 2>/dev/null
	printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth,serverAuth\nsubjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\n' \
		"${NODE_NAME}" >"${conf}/kubelet.ext"
	openssl req -new -key "${conf}/kubelet.key" -subj "/O=system:nodes/CN=system:node:${NODE_NAME}" \
		-out "${conf}/kubelet.csr" 2>/dev/null
	openssl x509 -req -in "${conf}/kubelet.csr" -CA "${certs}/ca.crt" -CAkey "${certs}/ca.key" -CAcreateserial \
		-days 30 -sha256 -extfile "${conf}/kubelet.ext" -out "${conf}/kubelet.crt" 2>/dev/null
	cat >"${conf}/kubelet.kubeconfig" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: aware-testbed
		  cluster:
		    server: https://127.0.0.1:$((BASE_PORT + 2))
		    certificate-authority: ${certs}/ca.crt
		users:
		- name: kubelet
		  user:
		    client-certificate: ${conf}/kubelet.crt
		    client-key: ${conf}/kubelet.key
		contexts:
		- name: aware-testbed
		  context: {cluster: aware-testbed, user: kubelet}
		current-context: aware-testbed
	EOF
	# This machine mounts cgroup v1, which kubelets since 1.35 refuse
	# unless told otherwise (failCgroupV1); it has no swap to check; the
	# eviction and image-GC thresholds are off so that a full disk on a
	# shared machine does not evict the pods under test.
	cat >"${conf}/kubelet.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		failCgroupV1: false
		cgroupDriver: cgroupfs
		failSwapOn: false
		containerRuntimeEndpoint: unix://${CONTAINERD_SOCK}
		address: 127.0.0.1
		port: ${KUBELET_PORT}
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: ${KUBELET_HEALTHZ_PORT}
		tlsCertFile: ${conf}/kubelet.crt
		tlsPrivateKeyFile: ${conf}/kubelet.key
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: ${certs}/ca.crt}
		authorization:
		  mode: Webhook
		podLogsDir: ${NODE_DIR}/pod-logs
		resolvConf: /etc/resolv.conf
		evictionHard: {}
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		localStorageCapacityIsolation: false
		registerNode: true
		serializeImagePulls: false
	EOF
}

start_kubelet() {
	local kubelet="$1"
	mkdir -p "${NODE_DIR}/kubelet" "${NODE_DIR}/pod-logs"
	start kubelet -- "${kubelet}" \
		--config "${NODE_DIR}/config/kubelet.yaml" \
		--kubeconfig "${NODE_DIR}/config/kubelet.kubeconfig" \
		--root-dir "${NODE_DIR}/kubelet" \
		--cert-dir "${NODE_DIR}/kubelet/pki" \
		--hostname-override "${NODE_NAME}" \
		--node-ip 127.0.0.1 \
		--v 2
	wait_for kubelet node_ready
}

# publish_address: the kubelet refuses a loopback --node-ip as the node's
# address ("nodeIP can't be loopback address") and then registers none, so
# metrics-server cannot scrape it ("no address matched types
# [InternalIP]"), kubectl logs fails ("no preferred addresses found") and the
# recommender gets no usage for any real pod. Without --node-ip it would
# publish a non-loopback address of the host, which no test traffic may
# target. So 127.0.0.1 is published on the node's status subresource: the
# kubelet's address setter fails before it touches the addresses, and its
# status updates leave them as they are (checked after one update period).
publish_address() {
	KUBECONFIG="${TESTBED_DIR}/kubeconfig" "${KUBECTL}" patch node "${NODE_NAME}" --subresource=status --type=merge \
		-p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"${NODE_NAME}\"}]}}" >&2
	wait_for kubelet node_has_address
	sleep 12 # the kubelet's status update period is 10 s
	node_has_address || die "the kubelet removed the node's published InternalIP 127.0.0.1"
	log "node ${NODE_NAME} has InternalIP 127.0.0.1"
}

node_has_address() {
	[[ "$(KUBECONFIG="${TESTBED_DIR}/kubeconfig" "${KUBECTL}" get node "${NODE_NAME}" \
		-o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')" == 127.0.0.1 ]]
}

node_ready() {
	[[ "$(KUBECONFIG="${TESTBED_DIR}/kubeconfig" "${KUBECTL}" get node "${NODE_NAME}" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

main() {
	local layouts=("$@")
	if ((${#layouts[@]} == 0)); then
		local d
		for d in "${ROOT}"/bin/images/aware-*; do
			[[ -f "${d}/index.json" ]] && layouts+=("${d}")
		done
	fi
	install_packages
	preflight
	# shellcheck disable=SC1091 # written by hack/testbed/up.sh
	KUBECTL="$(source "${TESTBED_DIR}/env" && printf '%s/kubectl' "${AWARE_TESTBED_BIN}")"
	local kubelet
	kubelet="$("${HERE}/build-kubelet.sh")"
	rm -rf "${NODE_DIR}"
	mkdir -p "${NODE_PIDS}" "${NODE_LOGS}" "${NODE_DIR}/config"
	trap on_exit EXIT
	PAUSE_IMAGE="docker.io/library/aware-pause:node"
	build_pause
	start_containerd
	import_layout "${NODE_DIR}/images/aware-pause"
	local l
	for l in "${layouts[@]}"; do
		import_layout "${l}"
	done
	write_kubelet_config
	start_kubelet "${kubelet}"
	publish_address
	UP_OK=1
	log "node ${NODE_NAME} Ready; kubelet on 127.0.0.1:${KUBELET_PORT}, containerd on ${CONTAINERD_SOCK}"
}

main "$@"
