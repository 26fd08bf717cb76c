#!/usr/bin/env bash
# Shows each testbed process (PID, whether it runs, RSS) and the total RSS.
# Exits non-zero if any component up.sh started is not running.
set -euo pipefail

# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PIDS="${TESTBED_DIR}/pids"
total=0
down=0
printf '%-24s %8s %8s %10s\n' COMPONENT PID STATE RSS_MIB
for name in "${TESTBED_COMPONENTS[@]}"; do
	pid="$(cat "${PIDS}/${name}.pid" 2>/dev/null || true)"
	if pid_alive "${pid}"; then
		kb="$(awk '/^VmRSS:/ { print $2 }' "/proc/${pid}/status")"
		total=$((total + kb))
		printf '%-24s %8s %8s %10d\n' "${name}" "${pid}" running $((kb / 1024))
	else
		down=$((down + 1))
		printf '%-24s %8s %8s %10s\n' "${name}" "${pid:--}" stopped -
	fi
done
printf '%-24s %8s %8s %10d\n' TOTAL "" "" $((total / 1024))
[[ "${down}" -eq 0 ]] || exit 1
