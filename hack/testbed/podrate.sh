#!/usr/bin/env bash
# podrate.sh N [NAMESPACE] [CLIENTS]: measures how fast the running testbed
# brings pods to Running. Creates N one-pod Deployments (the pods of
# make bench-vpa: one container, requests 100m/100Mi, KWOK usage annotations)
# in NAMESPACE (default podrate, created here; it must not exist), from
# CLIENTS kubectl processes at once (default 32, as the harness's workers),
# and every 10 s prints the pods created, bound and Running, the load
# average and each testbed component's share of a CPU since the last line;
# at the end, N divided by the seconds from the first create to the last pod
# Running. With PDB=1 a PodDisruptionBudget covers every pod first, as the
# harness's does. Delete the namespace afterwards to measure again.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "${HERE}/lib.sh"

N="${1:?usage: podrate.sh N [NAMESPACE] [CLIENTS]}"
NS="${2:-podrate}"
CLIENTS="${3:-32}"
[[ "${N}" =~ ^[1-9][0-9]*$ && "${CLIENTS}" =~ ^[1-9][0-9]*$ ]] || die "N and CLIENTS must be positive integers"
running_component >/dev/null || die "no testbed runs from ${TESTBED_DIR}"
# shellcheck disable=SC1091 # written by up.sh at run time
source "${TESTBED_DIR}/env"
K=("${AWARE_TESTBED_BIN}/kubectl" --kubeconfig "${KUBECONFIG}")

# cpu_ticks: "component ticks" (user + system, 1/100 s) of each component.
cpu_ticks() {
	local f
	for f in "${TESTBED_DIR}/pids/"*.pid; do
		printf '%s %s\n' "$(basename "${f}" .pid)" "$(awk '{ print $14 + $15 }' "/proc/$(cat "${f}")/stat" 2>/dev/null || echo 0)"
	done
}

"${K[@]}" create namespace "${NS}" >/dev/null
until "${K[@]}" -n "${NS}" get serviceaccount default >/dev/null 2>&1; do sleep 0.5; done
if [[ "${PDB:-0}" == 1 ]]; then
	"${K[@]}" -n "${NS}" create -f - >/dev/null <<-'EOF'
		apiVersion: policy/v1
		kind: PodDisruptionBudget
		metadata: {name: all}
		spec: {minAvailable: "100%", selector: {matchLabels: {bench: rate}}}
	EOF
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
for ((i = 0; i < N; i++)); do
	cat >>"${work}/part$((i % CLIENTS)).yaml" <<-EOF
		---
		apiVersion: apps/v1
		kind: Deployment
		metadata: {name: d-${i}, labels: {app: d-${i}, bench: rate}}
		spec:
		  replicas: 1
		  selector: {matchLabels: {app: d-${i}}}
		  template:
		    metadata:
		      labels: {app: d-${i}, bench: rate}
		      annotations: {kwok.x-k8s.io/usage-cpu: 150m, kwok.x-k8s.io/usage-memory: 120Mi}
		    spec:
		      terminationGracePeriodSeconds: 0
		      containers:
		      - name: app
		        image: registry.k8s.io/pause:3.10
		        resources: {requests: {cpu: 100m, memory: 100Mi}}
	EOF
done

start="$(now)"
for f in "${work}"/part*.yaml; do
	"${K[@]}" -n "${NS}" create -f "${f}" >/dev/null &
done
cpu_ticks >"${work}/cpu0"
last="${start}"
while true; do
	sleep 10
	t="$(now)"
	read -r pods bound running < <("${K[@]}" -n "${NS}" get pods --no-headers \
		-o custom-columns=NODE:.spec.nodeName,PHASE:.status.phase 2>/dev/null |
		awk '{ p++; if ($1 != "<none>") b++; if ($2 == "Running") r++ } END { print p + 0, b + 0, r + 0 }')
	cpu_ticks >"${work}/cpu1"
	shares="$(join "${work}/cpu0" "${work}/cpu1" |
		awk -v d="$(awk -v a="${last}" -v b="${t}" 'BEGIN { print b - a }')" '{ printf " %s %.0f%%", $1, ($3 - $2) / d }')"
	mv "${work}/cpu1" "${work}/cpu0"
	last="${t}"
	printf '%5.0fs pods %d bound %d running %d load %s |%s\n' "$(awk -v a="${start}" -v b="${t}" 'BEGIN { print b - a }')" \
		"${pods}" "${bound}" "${running}" "$(cut -d' ' -f1 /proc/loadavg)" "${shares}"
	((running < N)) || break
done
wait
awk -v a="${start}" -v b="${t}" -v n="${N}" \
	'BEGIN { printf "%d pods Running %.1f s after the first create: %.1f pods/s\n", n, b - a, n / (b - a) }'
