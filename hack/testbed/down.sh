#!/usr/bin/env bash
# Stops the processes up.sh started, and only those: each by the PID in its
# PID file, and only if that PID still is the process up.sh started (same
# start time), so a recycled PID is never signalled. TERM first, KILL after a
# grace period. Safe to run any number of times.
#
# Keeps the state dir (logs, certs) for post-mortems; up.sh wipes it.
set -euo pipefail

# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PIDS="${TESTBED_DIR}/pids"
GRACE="${AWARE_TESTBED_STOP_GRACE:-10}"

# ours NAME PID: true if PID is alive and is the process recorded for NAME.
ours() {
	local name="$1" pid="$2"
	pid_alive "${pid}" || return 1
	local want="${PIDS}/${name}.start" got
	# Without a recorded start time (up.sh interrupted between the two
	# writes) the PID file alone has to do; it was written moments earlier.
	[[ -s "${want}" ]] || return 0
	got="$(awk '{ print $22 }' "/proc/${pid}/stat" 2>/dev/null)" || return 1
	[[ "${got}" == "$(cat "${want}")" ]]
}

main() {
	if [[ ! -d "${PIDS}" ]]; then
		log "no testbed state in ${TESTBED_DIR}; nothing to stop"
		return 0
	fi
	local i name pid signalled=()
	# Reverse start order: clients before the apiserver, the apiserver before etcd.
	for ((i = ${#TESTBED_COMPONENTS[@]} - 1; i >= 0; i--)); do
		name="${TESTBED_COMPONENTS[i]}"
		[[ -s "${PIDS}/${name}.pid" ]] || continue
		pid="$(cat "${PIDS}/${name}.pid")"
		if ours "${name}" "${pid}"; then
			kill -TERM "${pid}" 2>/dev/null || true
			signalled+=("${name}:${pid}")
		else
			rm -f "${PIDS}/${name}.pid" "${PIDS}/${name}.start"
		fi
	done

	local deadline=$((SECONDS + GRACE)) entry left
	while true; do
		left=()
		for entry in "${signalled[@]}"; do
			if ours "${entry%%:*}" "${entry##*:}"; then
				left+=("${entry}")
			fi
		done
		((${#left[@]} > 0)) || break
		if ((SECONDS >= deadline)); then
			for entry in "${left[@]}"; do
				log "${entry%%:*} (pid ${entry##*:}) ignored TERM for ${GRACE}s; sending KILL"
				kill -KILL "${entry##*:}" 2>/dev/null || true
			done
			sleep 0.2
			break
		fi
		sleep 0.2
	done

	for entry in "${signalled[@]}"; do
		rm -f "${PIDS}/${entry%%:*}.pid" "${PIDS}/${entry%%:*}.start"
	done
	rm -f "${TESTBED_DIR}/env"
	if ((${#signalled[@]} > 0)); then
		log "stopped ${#signalled[@]} testbed process(es): ${signalled[*]}"
	else
		log "no testbed process was running"
	fi
}

main "$@"
