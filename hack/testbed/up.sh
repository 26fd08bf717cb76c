#!/usr/bin/env bash
# Starts a real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, KWOK (fake nodes and pods, plus the
# kubelet resource-metrics endpoint), metrics-server and Prometheus.
#
# State (certs, logs, PID files, kubeconfig, env) goes to
# ${AWARE_TESTBED_DIR:-/tmp/aware-testbed}; `source "$AWARE_TESTBED_DIR/env"`
# afterwards. Stop with down.sh. See lib.sh for every tunable.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "${HERE}/lib.sh"
# shellcheck source=kwok.sh source-path=SCRIPTDIR
source "${HERE}/kwok.sh"

# Service ClusterIPs come from loopback: nothing here runs kube-proxy, so a
# ClusterIP is only ever dialled by the apiserver itself (aggregated APIs and
# webhooks behind a non-ExternalName Service). From this range such a dial
# stays on this machine and fails fast instead of leaving it.
SERVICE_CIDR="${AWARE_TESTBED_SERVICE_CIDR:-127.0.100.0/24}"
SERVICE_FIRST_IP="${SERVICE_CIDR%.*}.1"

UP_START="$(now)"
UP_OK=0
DEADLINE=$((SECONDS + READY_TIMEOUT))

CERTS="${TESTBED_DIR}/certs"
LOGS="${TESTBED_DIR}/logs"
PIDS="${TESTBED_DIR}/pids"
CONF="${TESTBED_DIR}/config"
KUBECONFIGS="${TESTBED_DIR}/kubeconfigs"
ADMIN_KUBECONFIG="${TESTBED_DIR}/kubeconfig"

on_exit() {
	local rc=$?
	if [[ "${UP_OK}" == 1 ]]; then
		return
	fi
	# A signal leaves $? at 0 here; the start failed all the same.
	((rc != 0)) || rc=1
	log "testbed start FAILED (exit ${rc}); stopping what was started and keeping ${LOGS}"
	local f
	for f in "${LOGS}"/*.log; do
		[[ -f "${f}" ]] || continue
		printf '\n===== tail -n 40 %s =====\n' "${f}" >&2
		tail -n 40 "${f}" >&2 || true
	done
	"${HERE}/down.sh" || true
	exit "${rc}"
}

# ---------------------------------------------------------------- preflight

preflight() {
	local running
	if running="$(running_component)"; then
		die "a testbed is already running from ${TESTBED_DIR} (${running% *} pid ${running#* }); run hack/testbed/down.sh first"
	fi
	local p busy=()
	for p in "${TESTBED_PORTS[@]}"; do
		if [[ -n "$(ss -Htln "sport = :${p}" 2>/dev/null)" ]]; then
			busy+=("${p}")
		fi
	done
	if ((${#busy[@]} > 0)); then
		die "ports already in use: ${busy[*]} (set AWARE_TESTBED_BASE_PORT to move the testbed; it uses ${BASE_PORT}..$((BASE_PORT + ${#TESTBED_PORTS[@]} - 1)))"
	fi
	# Ending in .0 with a /16../24 prefix keeps SERVICE_FIRST_IP right.
	[[ "${SERVICE_CIDR}" =~ ^127(\.[0-9]{1,3}){2}\.0/(1[6-9]|2[0-4])$ ]] ||
		die "AWARE_TESTBED_SERVICE_CIDR=${SERVICE_CIDR}: must be a /16../24 inside 127.0.0.0/8 ending in .0"
	[[ "${KWOK_POD_WORKERS}" =~ ^[1-9][0-9]*$ ]] ||
		die "AWARE_TESTBED_KWOK_POD_WORKERS=${KWOK_POD_WORKERS}: must be a positive integer"
	case "${EMULATOR_ADDR}" in
	127.* | localhost:*) ;;
	*) die "AWARE_EMULATOR_ADDR=${EMULATOR_ADDR}: only loopback targets are allowed" ;;
	esac
}

# ------------------------------------------------------------- certificates

# new_key NAME: ECDSA P-256, which Go TLS, the apiserver's token signer (ES256)
# and Prometheus all take; RSA keys cost ~10 s for the dozen here on a busy
# 2-core machine.
new_key() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "${CERTS}/$1.key" 2>>"${LOGS}/openssl.log"
	chmod 600 "${CERTS}/$1.key"
}

new_ca() {
	local name="$1" cn="$2"
	new_key "${name}"
	openssl req -x509 -new -key "${CERTS}/${name}.key" -subj "/CN=${cn}" -days 3650 -sha256 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "${CERTS}/${name}.crt" 2>>"${LOGS}/openssl.log"
}

# issue NAME CA SUBJECT USAGE [SAN]: USAGE is serverAuth, clientAuth or both.
issue() {
	local name="$1" ca="$2" subj="$3" usage="$4" san="${5:-}"
	new_key "${name}"
	local ext="${CERTS}/${name}.ext"
	{
		printf 'basicConstraints=critical,CA:FALSE\n'
		printf 'keyUsage=critical,digitalSignature,keyEncipherment\n'
		printf 'extendedKeyUsage=%s\n' "${usage}"
		[[ -z "${san}" ]] || printf 'subjectAltName=%s\n' "${san}"
	} >"${ext}"
	openssl req -new -key "${CERTS}/${name}.key" -subj "${subj}" -out "${CERTS}/${name}.csr" 2>>"${LOGS}/openssl.log"
	openssl x509 -req -in "${CERTS}/${name}.csr" -CA "${CERTS}/${ca}.crt" -CAkey "${CERTS}/${ca}.key" \
		-CAcreateserial -days 365 -sha256 -extfile "${ext}" -out "${CERTS}/${name}.crt" 2>>"${LOGS}/openssl.log"
	rm -f "${CERTS}/${name}.csr" "${ext}"
}

make_certs() {
	local local_san="DNS:localhost,IP:127.0.0.1"
	new_ca ca aware-testbed-ca
	# A separate CA for the aggregation layer: the apiserver trusts requests
	# signed by it as carrying an already authenticated user, so it must not
	# be the CA that signs ordinary client certs.
	new_ca front-proxy-ca aware-testbed-front-proxy-ca

	issue apiserver ca "/CN=kube-apiserver" serverAuth \
		"${local_san},DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:${SERVICE_FIRST_IP}"
	issue apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	issue front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
	issue admin ca "/O=system:masters/CN=aware-admin" clientAuth
	issue kube-controller-manager ca "/CN=system:kube-controller-manager" clientAuth
	issue kube-scheduler ca "/CN=system:kube-scheduler" clientAuth
	# KWOK plays every kubelet and manages node and pod status, leases and
	# its own objects; a kubelet-shaped identity would not cover that.
	issue kwok-client ca "/O=system:masters/CN=kwok" clientAuth
	issue kwok ca "/CN=kwok" serverAuth "${local_san}"
	issue metrics-server-client ca "/CN=system:metrics-server" clientAuth
	# The aggregator verifies the name <service>.<namespace>.svc, whatever
	# address the ExternalName Service resolves to.
	issue metrics-server ca "/CN=metrics-server" serverAuth \
		"DNS:metrics-server.kube-system.svc,${local_san}"

	new_key sa
	openssl pkey -in "${CERTS}/sa.key" -pubout -out "${CERTS}/sa.pub" 2>>"${LOGS}/openssl.log"
	rm -f "${CERTS}"/*.srl
}

# write_kubeconfig FILE CERT_NAME
write_kubeconfig() {
	local file="$1" cert="$2"
	cat >"${file}" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: aware-testbed
		  cluster:
		    server: https://127.0.0.1:${APISERVER_PORT}
		    certificate-authority: ${CERTS}/ca.crt
		users:
		- name: ${cert}
		  user:
		    client-certificate: ${CERTS}/${cert}.crt
		    client-key: ${CERTS}/${cert}.key
		contexts:
		- name: aware-testbed
		  context:
		    cluster: aware-testbed
		    user: ${cert}
		current-context: aware-testbed
	EOF
	chmod 600 "${file}"
}

# ---------------------------------------------------------------- processes

# start NAME [ENV-ARGS...] -- CMD...: ENV-ARGS go to env(1) (VAR=VAL, -u VAR); runs CMD in its own session so that a
# signal to up.sh's process group (Ctrl-C in make) does not reach it and
# down.sh alone decides when it stops. The PID file is written by the child
# itself, just before exec, so it always names the component, even when
# setsid has to fork.
start() {
	local name="$1"
	shift
	local envs=()
	while [[ "$1" != "--" ]]; do
		envs+=("$1")
		shift
	done
	shift
	local pidfile="${PIDS}/${name}.pid"
	log "starting ${name}"
	# shellcheck disable=SC2016 # expanded by the child shell, on purpose
	setsid env "${envs[@]}" bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "${pidfile}" "$@" \
		>"${LOGS}/${name}.log" 2>&1 </dev/null &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "${pidfile}" ]] && break
		sleep 0.05
	done
	[[ -s "${pidfile}" ]] || die "${name} did not write ${pidfile}"
	# The start time tells down.sh whether the PID still is this process
	# rather than a recycled number.
	local pid
	pid="$(cat "${pidfile}")"
	awk '{ print $22 }' "/proc/${pid}/stat" >"${PIDS}/${name}.start" 2>/dev/null || true
}

# wait_for NAME CMD...: polls CMD until it succeeds, the component dies, or the
# overall deadline passes.
wait_for() {
	local name="$1" start
	shift
	start="$(now)"
	local pidfile="${PIDS}/${name}.pid"
	while true; do
		if "$@" >/dev/null 2>&1; then
			log "${name} ready ($(elapsed "${start}")s)"
			return 0
		fi
		if [[ -f "${pidfile}" ]] && ! pid_alive "$(cat "${pidfile}")"; then
			die "${name} exited during start-up (see ${LOGS}/${name}.log)"
		fi
		if ((SECONDS >= DEADLINE)); then
			die "timed out after ${READY_TIMEOUT}s waiting for ${name}"
		fi
		sleep 0.2
	done
}

kubectl_admin() {
	"${BIN}/kubectl" --kubeconfig "${ADMIN_KUBECONFIG}" "$@"
}

curl_ok() {
	local url="$1"
	shift
	[[ "$(curl -sS --max-time 2 "$@" "${url}")" == "${EXPECT:-ok}" ]]
}

start_etcd() {
	# etcd reads every ETCD_* variable as a flag; one left in a developer's
	# environment would silently reconfigure it.
	local unset_etcd=() v
	for v in $(compgen -e); do
		[[ "${v}" != ETCD_* ]] || unset_etcd+=(-u "${v}")
	done
	start etcd "${unset_etcd[@]}" -- "${BIN}/etcd" \
		--name aware-testbed \
		--data-dir "${TESTBED_DIR}/etcd-data" \
		--listen-client-urls "http://127.0.0.1:${ETCD_PORT}" \
		--advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
		--listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
		--initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
		--initial-cluster "aware-testbed=http://127.0.0.1:${ETCD_PEER_PORT}" \
		--unsafe-no-fsync \
		--log-level warn
	wait_for etcd etcd_healthy
}

etcd_healthy() {
	curl -sS --max-time 2 "http://127.0.0.1:${ETCD_PORT}/health" | grep -q '"health":"true"'
}

# Kubelets by InternalIP first: the default order dials a node by its
# Hostname, which resolves for neither the real node (aware-real-node) nor
# KWOK's, so kubectl logs and exec through the apiserver failed ("lookup
# aware-real-node: no such host") and a failed node test printed no
# component log. Both publish InternalIP 127.0.0.1, which the real
# kubelet's serving certificate names.
#
# No ResourceQuota admission: nothing here sets a quota, and its evaluator
# queues every create of a namespace behind one worker. Bringing up 5,000
# targets (15,000 pods) it accounted for 1,332 s of the 1,344 s that create
# admission took, and at a load of 14-18 creates failed with "resource quota
# evaluation timed out" (docs/results/performance.md).
start_apiserver() {
	start kube-apiserver -- "${BIN}/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
		--bind-address 127.0.0.1 \
		--advertise-address 127.0.0.1 \
		--secure-port "${APISERVER_PORT}" \
		--cert-dir "${TESTBED_DIR}/apiserver-certs" \
		--tls-cert-file "${CERTS}/apiserver.crt" \
		--tls-private-key-file "${CERTS}/apiserver.key" \
		--client-ca-file "${CERTS}/ca.crt" \
		--authorization-mode Node,RBAC \
		--service-account-issuer "https://127.0.0.1:${APISERVER_PORT}" \
		--service-account-key-file "${CERTS}/sa.pub" \
		--service-account-signing-key-file "${CERTS}/sa.key" \
		--service-cluster-ip-range "${SERVICE_CIDR}" \
		--endpoint-reconciler-type none \
		--allow-privileged=true \
		--kubelet-client-certificate "${CERTS}/apiserver-kubelet-client.crt" \
		--kubelet-client-key "${CERTS}/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "${CERTS}/ca.crt" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--requestheader-client-ca-file "${CERTS}/front-proxy-ca.crt" \
		--requestheader-allowed-names front-proxy-client \
		--requestheader-username-headers X-Remote-User \
		--requestheader-group-headers X-Remote-Group \
		--requestheader-extra-headers-prefix X-Remote-Extra- \
		--proxy-client-cert-file "${CERTS}/front-proxy-client.crt" \
		--proxy-client-key-file "${CERTS}/front-proxy-client.key" \
		--enable-aggregator-routing=false \
		--disable-admission-plugins ResourceQuota \
		--profiling=false
	wait_for kube-apiserver curl_ok "https://127.0.0.1:${APISERVER_PORT}/readyz" \
		--cacert "${CERTS}/ca.crt" --cert "${CERTS}/admin.crt" --key "${CERTS}/admin.key"
}

start_controller_manager() {
	local kc="${KUBECONFIGS}/kube-controller-manager.kubeconfig"
	start kube-controller-manager -- "${BIN}/kube-controller-manager" \
		--kubeconfig "${kc}" \
		--authentication-kubeconfig "${kc}" \
		--authorization-kubeconfig "${kc}" \
		--bind-address 127.0.0.1 \
		--secure-port "${KCM_PORT}" \
		--cert-dir "${TESTBED_DIR}/kcm-certs" \
		--controllers '*' \
		--leader-elect=false \
		--use-service-account-credentials=true \
		--root-ca-file "${CERTS}/ca.crt" \
		--service-account-private-key-file "${CERTS}/sa.key" \
		--cluster-signing-cert-file "${CERTS}/ca.crt" \
		--cluster-signing-key-file "${CERTS}/ca.key" \
		--service-cluster-ip-range "${SERVICE_CIDR}" \
		--allocate-node-cidrs=false \
		--profiling=false \
		${CLIENT_QPS:+--kube-api-qps "${CLIENT_QPS}" --kube-api-burst "$((CLIENT_QPS * 2))" --concurrent-replicaset-syncs 20 --concurrent-deployment-syncs 20}
}

start_scheduler() {
	local kc="${KUBECONFIGS}/kube-scheduler.kubeconfig"
	start kube-scheduler -- "${BIN}/kube-scheduler" \
		--kubeconfig "${kc}" \
		--authentication-kubeconfig "${kc}" \
		--authorization-kubeconfig "${kc}" \
		--bind-address 127.0.0.1 \
		--secure-port "${SCHEDULER_PORT}" \
		--cert-dir "${TESTBED_DIR}/scheduler-certs" \
		--leader-elect=false \
		--profiling=false \
		${CLIENT_QPS:+--kube-api-qps "${CLIENT_QPS}" --kube-api-burst "$((CLIENT_QPS * 2))"}
}

# ---------------------------------------------------------------- KWOK

start_kwok() {
	mkdir -p "${CONF}/kwok/stage" "${TESTBED_DIR}/kwok-home"
	cp "${SHARE}/kwok/stage/"*.yaml "${CONF}/kwok/stage/"
	cp "${SHARE}/kwok/metrics/metrics-resource.yaml" "${CONF}/kwok/"
	write_pod_ready_stage
	write_resize_stage
	write_resize_refused_stage
	write_ready_again_stage
	write_usage
	write_kwok_config
	local configs=() f
	for f in "${CONF}/kwok/kwok.yaml" "${CONF}/kwok/stage/"*.yaml "${CONF}/kwok/metrics-resource.yaml" "${CONF}/kwok/usage.yaml"; do
		configs+=(--config "${f}")
	done
	# A private HOME, because kwok also reads ~/.kwok/kwok.yaml.
	start kwok HOME="${TESTBED_DIR}/kwok-home" -- "${BIN}/kwok" \
		--kubeconfig "${KUBECONFIGS}/kwok.kubeconfig" \
		"${configs[@]}" \
		--manage-all-nodes=false \
		--manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--node-ip 127.0.0.1 \
		--node-port "${KWOK_PORT}" \
		--server-address "127.0.0.1:${KWOK_PORT}" \
		--tls-cert-file "${CERTS}/kwok.crt" \
		--tls-private-key-file "${CERTS}/kwok.key" \
		--node-lease-duration-seconds 40
	wait_for kwok curl_ok "https://127.0.0.1:${KWOK_PORT}/healthz" --cacert "${CERTS}/ca.crt"
}

node_names() {
	local i
	for ((i = 0; i < NODE_COUNT; i++)); do
		printf 'aware-node-%d\n' "${i}"
	done
}

# The nodes are created with both addresses a kubelet reports, InternalIP
# (KWOK's --node-ip) and Hostname. KWOK's bundled node-initialize stage,
# which plays again whenever the node is not Ready (as after an API server
# or etcd outage, when kube-controller-manager marks it NodeStatusUnknown
# for a lease not renewed), adds the addresses a node lacks; but it is run
# without --node-name, so it has no Hostname to add, and a node with an
# InternalIP and no Hostname got the patch `addresses: null`, which deletes
# both. metrics-server then had no address to scrape (no PodMetrics, so no
# recommendation) until KWOK's heartbeat stage put the InternalIP back,
# about 10 minutes later.
create_nodes() {
	local n
	for n in $(node_names); do
		cat <<-EOF
			---
			apiVersion: v1
			kind: Node
			metadata:
			  name: ${n}
			  annotations:
			    kwok.x-k8s.io/node: fake
			    node.alpha.kubernetes.io/ttl: "0"
			    metrics.k8s.io/resource-metrics-path: /metrics/nodes/${n}/metrics/resource
			  labels:
			    kubernetes.io/arch: amd64
			    kubernetes.io/hostname: ${n}
			    kubernetes.io/os: linux
			    type: kwok
			status:
			  addresses:
			  - type: InternalIP
			    address: 127.0.0.1
			  - type: Hostname
			    address: ${n}
			  allocatable:
			    cpu: "${NODE_CPU}"
			    memory: ${NODE_MEMORY}
			    pods: "${NODE_PODS}"
			  capacity:
			    cpu: "${NODE_CPU}"
			    memory: ${NODE_MEMORY}
			    pods: "${NODE_PODS}"
			  nodeInfo:
			    architecture: amd64
			    operatingSystem: linux
			    kubeletVersion: ${KUBE_VERSION}
			    kubeProxyVersion: ${KUBE_VERSION}
		EOF
	done | kubectl_admin apply -f - >/dev/null
	log "created ${NODE_COUNT} fake node(s) with ${NODE_CPU} CPU / ${NODE_MEMORY} each"
}

nodes_ready() {
	local n
	for n in $(node_names); do
		[[ "$(kubectl_admin get node "${n}" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" == True ]] || return 1
	done
}

# ------------------------------------------------------------ metrics-server

# metrics-server runs as its own identity with the RBAC its upstream manifests
# grant, so the aggregation layer is exercised the way it is in a cluster.
# The Service is ExternalName -> localhost because there is no kube-proxy.
apply_metrics_server_objects() {
	local ca_bundle
	ca_bundle="$(base64 -w0 <"${CERTS}/ca.crt")"
	kubectl_admin apply -f - >/dev/null <<-EOF
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRole
		metadata:
		  name: system:metrics-server
		rules:
		- apiGroups: [""]
		  resources: [nodes/metrics]
		  verbs: [get]
		- apiGroups: [""]
		  resources: [pods, nodes]
		  verbs: [get, list, watch]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: system:metrics-server
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:metrics-server}
		subjects:
		- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server"}
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: ClusterRoleBinding
		metadata:
		  name: metrics-server:system:auth-delegator
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
		subjects:
		- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server"}
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: RoleBinding
		metadata:
		  name: metrics-server-auth-reader
		  namespace: kube-system
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
		subjects:
		- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server"}
		---
		apiVersion: v1
		kind: Service
		metadata:
		  name: metrics-server
		  namespace: kube-system
		spec:
		  type: ExternalName
		  externalName: localhost
		---
		apiVersion: apiregistration.k8s.io/v1
		kind: APIService
		metadata:
		  name: v1beta1.metrics.k8s.io
		spec:
		  group: metrics.k8s.io
		  version: v1beta1
		  groupPriorityMinimum: 100
		  versionPriority: 100
		  caBundle: ${ca_bundle}
		  service:
		    name: metrics-server
		    namespace: kube-system
		    port: ${METRICS_SERVER_PORT}
	EOF
}

start_metrics_server() {
	local kc="${KUBECONFIGS}/metrics-server.kubeconfig"
	apply_metrics_server_objects
	start metrics-server -- "${BIN}/metrics-server" \
		--kubeconfig "${kc}" \
		--authentication-kubeconfig "${kc}" \
		--authorization-kubeconfig "${kc}" \
		--bind-address 127.0.0.1 \
		--secure-port "${METRICS_SERVER_PORT}" \
		--cert-dir "${TESTBED_DIR}/metrics-server-certs" \
		--tls-cert-file "${CERTS}/metrics-server.crt" \
		--tls-private-key-file "${CERTS}/metrics-server.key" \
		--kubelet-use-node-status-port \
		--kubelet-preferred-address-types InternalIP \
		--kubelet-certificate-authority "${CERTS}/ca.crt" \
		--metric-resolution 10s \
		--kubelet-request-timeout 5s
	wait_for metrics-server apiservice_available
}

apiservice_available() {
	[[ "$(kubectl_admin get apiservice v1beta1.metrics.k8s.io -o 'jsonpath={.status.conditions[?(@.type=="Available")].status}')" == True ]]
}

# ---------------------------------------------------------------- Prometheus

write_prometheus_config() {
	local n
	{
		cat <<-EOF
			# Generated by hack/testbed/up.sh.
			global:
			  scrape_interval: 5s
			  scrape_timeout: 4s
			  evaluation_interval: 5s
			scrape_configs:
			# KWOK serves each fake node's kubelet resource metrics
			# (container_cpu_usage_seconds_total, container_memory_working_set_bytes,
			# ...) on one port, one path per node.
			- job_name: kubelet
			  scrape_interval: ${KUBELET_SCRAPE_INTERVAL}
			  scheme: https
			  tls_config:
			    ca_file: ${CERTS}/ca.crt
			  static_configs:
		EOF
		for n in $(node_names); do
			cat <<-EOF
				  - targets: ['127.0.0.1:${KWOK_PORT}']
				    labels:
				      __metrics_path__: /metrics/nodes/${n}/metrics/resource
				      node: ${n}
				      instance: ${n}
			EOF
		done
		cat <<-EOF
			# Application-level series (request rate, latency) of the emulated
			# workloads; the emulator may start after Prometheus.
			- job_name: workload-emulator
			  static_configs:
			  - targets: ['${EMULATOR_ADDR}']
		EOF
	} >"${CONF}/prometheus.yml"
}

start_prometheus() {
	write_prometheus_config
	if [[ -x "${BIN}/promtool" ]]; then
		"${BIN}/promtool" check config "${CONF}/prometheus.yml" >/dev/null
	fi
	start prometheus -- "${BIN}/prometheus" \
		--config.file "${CONF}/prometheus.yml" \
		--storage.tsdb.path "${TESTBED_DIR}/prometheus-data" \
		--storage.tsdb.retention.time 1d \
		--web.listen-address "127.0.0.1:${PROMETHEUS_PORT}" \
		--web.enable-lifecycle
	EXPECT_CODE=200 wait_for prometheus http_code_ok "http://127.0.0.1:${PROMETHEUS_PORT}/-/ready"
}

http_code_ok() {
	[[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1")" == "${EXPECT_CODE}" ]]
}

# -------------------------------------------------------------------- env

write_env() {
	local tmp="${TESTBED_DIR}/env.tmp"
	{
		printf '# Generated by hack/testbed/up.sh; source it, or read it with e2e/framework.\n'
		printf 'export AWARE_TESTBED_DIR="%s"\n' "${TESTBED_DIR}"
		printf 'export KUBECONFIG="%s"\n' "${ADMIN_KUBECONFIG}"
		printf 'export AWARE_TESTBED_BIN="%s"\n' "${BIN}"
		printf 'export AWARE_TESTBED_CA="%s"\n' "${CERTS}/ca.crt"
		printf 'export AWARE_APISERVER_URL="https://127.0.0.1:%s"\n' "${APISERVER_PORT}"
		printf 'export PROMETHEUS_URL="http://127.0.0.1:%s"\n' "${PROMETHEUS_PORT}"
		printf 'export AWARE_PROMETHEUS_CONFIG="%s"\n' "${CONF}/prometheus.yml"
		printf 'export AWARE_KWOK_URL="https://127.0.0.1:%s"\n' "${KWOK_PORT}"
		printf 'export AWARE_METRICS_SERVER_URL="https://127.0.0.1:%s"\n' "${METRICS_SERVER_PORT}"
		printf 'export AWARE_EMULATOR_ADDR="%s"\n' "${EMULATOR_ADDR}"
		printf 'export AWARE_TESTBED_NODES="%s"\n' "$(node_names | paste -sd' ')"
		printf 'export AWARE_TESTBED_SERVICE_CIDR="%s"\n' "${SERVICE_CIDR}"
		printf 'export AWARE_TESTBED_BASE_PORT="%s"\n' "${BASE_PORT}"
	} >"${tmp}"
	mv "${tmp}" "${TESTBED_DIR}/env"
}

total_rss_mib() {
	local f pid kb total=0
	for f in "${PIDS}"/*.pid; do
		pid="$(cat "${f}")"
		kb="$(awk '/^VmRSS:/ { print $2 }' "/proc/${pid}/status" 2>/dev/null || echo 0)"
		total=$((total + ${kb:-0}))
	done
	echo $((total / 1024))
}

main() {
	preflight
	local install
	install="$("${HERE}/build.sh")"
	BIN="${install}/bin"
	SHARE="${install}/share"
	# Restart the clock: a cold build is not start-up time.
	UP_START="$(now)"
	DEADLINE=$((SECONDS + READY_TIMEOUT))

	trap on_exit EXIT
	rm -rf "${TESTBED_DIR}"
	mkdir -p "${CERTS}" "${LOGS}" "${PIDS}" "${CONF}" "${KUBECONFIGS}"
	chmod 700 "${TESTBED_DIR}"

	make_certs
	write_kubeconfig "${ADMIN_KUBECONFIG}" admin
	local c
	for c in kube-controller-manager kube-scheduler metrics-server-client kwok-client; do
		write_kubeconfig "${KUBECONFIGS}/${c%-client}.kubeconfig" "${c}"
	done
	log "certificates and kubeconfigs in ${TESTBED_DIR} ($(elapsed "${UP_START}")s)"

	start_etcd
	start_apiserver
	start_controller_manager
	start_scheduler
	start_kwok
	wait_for kube-controller-manager curl_ok "https://127.0.0.1:${KCM_PORT}/healthz" -k
	wait_for kube-scheduler curl_ok "https://127.0.0.1:${SCHEDULER_PORT}/healthz" -k
	# The controller-manager doing its job, and pods being creatable in
	# "default" at all, both show as this ServiceAccount existing.
	wait_for default-serviceaccount kubectl_admin get serviceaccount default -n default
	create_nodes
	wait_for nodes nodes_ready
	start_metrics_server
	start_prometheus
	write_env

	UP_OK=1
	log "testbed ready in $(elapsed "${UP_START}")s; components use $(total_rss_mib) MiB RSS in total"
	log "apiserver https://127.0.0.1:${APISERVER_PORT}, Prometheus http://127.0.0.1:${PROMETHEUS_PORT}"
	log "use it with: source ${TESTBED_DIR}/env"
}

main "$@"
