#!/usr/bin/env bash
# Stops the node hack/node/up.sh started, and only it: the kubelet by its
# recorded PID, then every container of this node's containerd (through its
# own socket, so another containerd on the machine is never touched), then
# containerd, then any shim of this containerd still alive (found by the
# socket path in its command line, signalled by PID), and unmounts what the
# kubelet and containerd mounted under the node's directory. Idempotent.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "${HERE}/lib.sh"

GRACE="${AWARE_TESTBED_STOP_GRACE:-10}"

# stop NAME: TERM, then KILL after GRACE seconds.
stop() {
	local name="$1" pid
	[[ -s "${NODE_PIDS}/${name}.pid" ]] || return 0
	pid="$(cat "${NODE_PIDS}/${name}.pid")"
	if node_ours "${name}" "${pid}"; then
		kill -TERM "${pid}" 2>/dev/null || true
		local deadline=$((SECONDS + GRACE))
		while node_ours "${name}" "${pid}"; do
			if ((SECONDS >= deadline)); then
				log "${name} (pid ${pid}) ignored TERM for ${GRACE}s; sending KILL"
				kill -KILL "${pid}" 2>/dev/null || true
				sleep 0.5
				break
			fi
			sleep 0.2
		done
		log "stopped ${name} (pid ${pid})"
	fi
	rm -f "${NODE_PIDS}/${name}.pid" "${NODE_PIDS}/${name}.start"
}

# stop_containers: every task this containerd runs, killed and deleted; a
# shim exits once its last task is deleted.
stop_containers() {
	[[ -S "${CONTAINERD_SOCK}" ]] || return 0
	local id
	for id in $(node_ctr tasks ls -q 2>/dev/null); do
		node_ctr tasks kill -s KILL "${id}" >/dev/null 2>&1 || true
	done
	sleep 1
	for id in $(node_ctr tasks ls -q 2>/dev/null); do
		node_ctr tasks delete -f "${id}" >/dev/null 2>&1 || true
	done
	for id in $(node_ctr containers ls -q 2>/dev/null); do
		node_ctr containers delete "${id}" >/dev/null 2>&1 || true
	done
}

# stop_shims: a shim outlives containerd by design; ours name our socket.
stop_shims() {
	local pid
	for pid in $(pgrep -f -- "-address ${CONTAINERD_SOCK}" || true); do
		kill -KILL "${pid}" 2>/dev/null && log "killed leftover shim ${pid}"
	done
}

unmount_all() {
	local m
	# Deepest first.
	while read -r m; do
		umount -l "${m}" 2>/dev/null || true
	done < <(awk -v d="${NODE_DIR}/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
}

main() {
	[[ -d "${NODE_DIR}" ]] || {
		log "no node state in ${NODE_DIR}; nothing to stop"
		return 0
	}
	stop kubelet
	stop_containers
	stop containerd
	stop_shims
	unmount_all
}

main "$@"
