#!/usr/bin/env bash
# Copyright 2026 The AWARE for Kubernetes Authors.
# SPDX-License-Identifier: Apache-2.0

# memlag.sh: does the test app's memory follow its requests in flight? It
# runs the app (e2e/cmd/testapp) as a local process in a cgroup of its own
# with a CPU quota, drives it with the load generator at a constant rate
# above what the quota serves, and prints twice a second the app's
# in-flight gauge, its held-memory gauge (the memory its requests have made
# resident) and the cgroup's working set (usage less inactive file pages,
# as the kubelet counts it), with what the working set is made of: the
# cgroup's anonymous and kernel memory, and the Go runtime's heap and
# stacks (the requests' own memory is anonymous, outside the Go heap). docs/real-node-rounds.md, "The memory of
# requests that wait for the CPU", says what it showed and why it matters.
#
# Root, cgroup v1 (cpu and memory controllers) or v2; loopback only; not in
# CI. Usage: hack/memlag.sh [--rate 30] [--duration 20s] [--then-rate 0]
#   [--then 0s] [--after 15s] [--quota-millicores 200] [--cpu 12ms]
#   [--memory-per-request 1Mi] [--base-memory 48Mi] [--port 18480]
# --then-rate and --then add a second phase after the first (the rate a
# pod keeps once a second replica takes half the load, say). At the end it
# prints the load generator's 5-s windows: sent, answered, lost, p95.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rate=30 duration=20s then_rate=0 then=0s after=15s quota=200 cpu=12ms mem=1Mi base=48Mi port=18480

die() {
	echo "memlag.sh: $*" >&2
	exit 1
}

while (($#)); do
	[[ $# -ge 2 ]] || die "$1 needs a value"
	case "$1" in
	--rate) rate="$2" ;;
	--duration) duration="$2" ;;
	--then-rate) then_rate="$2" ;;
	--then) then="$2" ;;
	--after) after="$2" ;;
	--quota-millicores) quota="$2" ;;
	--cpu) cpu="$2" ;;
	--memory-per-request) mem="$2" ;;
	--base-memory) base="$2" ;;
	--port) port="$2" ;;
	*) die "unknown flag $1" ;;
	esac
	shift 2
done
[[ "${quota}" =~ ^[1-9][0-9]*$ ]] || die "--quota-millicores ${quota}: want a positive whole number"
[[ "${port}" =~ ^[1-9][0-9]*$ && "${port}" -lt 65535 ]] || die "--port ${port}: want 1-65534 (the metrics take the next)"
seconds() { # a Go duration of whole seconds or minutes: 20s, 2m
	case "$1" in
	*m) [[ "${1%m}" =~ ^[0-9]+$ ]] && echo $((${1%m} * 60)) ;;
	*s) [[ "${1%s}" =~ ^[0-9]+$ ]] && echo "${1%s}" ;;
	esac
}
load_s="$(seconds "${duration}")" || true
after_s="$(seconds "${after}")" || true
then_s="$(seconds "${then}")" || true
[[ -n "${load_s}" && "${load_s}" -gt 0 && "${load_s}" -le 600 ]] || die "--duration ${duration}: want 1s-10m in whole seconds or minutes"
[[ -n "${after_s}" && "${after_s}" -le 600 ]] || die "--after ${after}: want 0s-10m in whole seconds or minutes"
[[ -n "${then_s}" && "${then_s}" -le 600 ]] || die "--then ${then}: want 0s-10m in whole seconds or minutes"
[[ "${rate}" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--rate ${rate}: want a number of requests/s"
[[ "${then_rate}" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--then-rate ${then_rate}: want a number of requests/s"
[[ "$(id -u)" == 0 ]] || die "needs root (it makes a cgroup)"
for c in curl go; do
	command -v "${c}" >/dev/null || die "${c} not found"
done

work="$(mktemp -d)"
(cd "${ROOT}" && go build -trimpath -o "${work}/" ./e2e/cmd/testapp ./e2e/cmd/loadgen) || die "go build failed"

# The cgroup: v2 where /sys/fs/cgroup is the unified hierarchy, else v1's
# cpu and memory controllers, under this shell's own groups.
name="aware-memlag-$$"
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
	parent="/sys/fs/cgroup$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)"
	parent="${parent%/}"
	echo "+cpu +memory" >"${parent}/cgroup.subtree_control" 2>/dev/null || true
	cg_cpu="${parent}/${name}" cg_mem="${parent}/${name}"
	mkdir "${cg_cpu}" || die "cannot make ${cg_cpu}"
	echo "$((quota * 100)) 100000" >"${cg_cpu}/cpu.max" || die "cannot set ${cg_cpu}/cpu.max"
	usage_file=memory.current inactive=inactive_file
else
	v1() { # the v1 directory of controller $1 for this shell
		local mnt path
		mnt="$(awk -v c="$1" '$3 == "cgroup" && $4 ~ "(^|,)" c "(,|$)" { print $2; exit }' /proc/mounts)"
		path="$(awk -F: -v c="$1" '$2 ~ "(^|,)" c "(,|$)" { print $3; exit }' /proc/self/cgroup)"
		[[ -n "${mnt}" ]] || die "no cgroup v1 $1 controller mounted"
		echo "${mnt}${path%/}"
	}
	cg_cpu="$(v1 cpu)/${name}" cg_mem="$(v1 memory)/${name}"
	mkdir "${cg_cpu}" "${cg_mem}" || die "cannot make ${cg_cpu} and ${cg_mem}"
	echo 100000 >"${cg_cpu}/cpu.cfs_period_us"
	echo "$((quota * 100))" >"${cg_cpu}/cpu.cfs_quota_us" || die "cannot set ${cg_cpu}/cpu.cfs_quota_us"
	usage_file=memory.usage_in_bytes inactive=total_inactive_file
fi

pids=()
# shellcheck disable=SC2317 # called through the trap
cleanup() {
	for p in "${pids[@]}"; do
		kill "${p}" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rmdir "${cg_cpu}" "${cg_mem}" 2>/dev/null || true
	rm -rf "${work}"
}
trap cleanup EXIT

# The app joins the cgroup before it starts: the shell moves itself in,
# then becomes the app.
bash -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/cgroup.procs" && exec "$0" "${@:3}"' \
	"${work}/testapp" "${cg_cpu}" "${cg_mem}" \
	--address "127.0.0.1:${port}" --metrics-address "127.0.0.1:$((port + 1))" \
	--cpu "${cpu}" --memory-per-request "${mem}" --base-memory "${base}" \
	--max-requests-per-connection 1 2>"${work}/testapp.log" &
pids+=($!)
for _ in $(seq 50); do
	curl -fsS --max-time 1 "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1 && break
	sleep 0.2
done
curl -fsS --max-time 1 "http://127.0.0.1:${port}/readyz" >/dev/null || die "the app did not get ready: $(tail -3 "${work}/testapp.log")"

# The rows' times must rise: a second phase of 0s is left out.
if ((then_s > 0)); then
	printf '0,%s\n%s,%s\n%s,0\n' "${rate}" "${load_s}" "${then_rate}" "$((load_s + then_s))"
else
	printf '0,%s\n%s,0\n' "${rate}" "${load_s}"
fi >"${work}/rates.csv"
"${work}/loadgen" --target "http://127.0.0.1:${port}/" --rates "${work}/rates.csv" \
	--duration "$((load_s + then_s + after_s))s" --requests-per-connection 1 --timeout 10s \
	--window 5s --records "${work}/records.jsonl" 2>"${work}/loadgen.log" &
load=$!
pids+=("${load}")

phases="${rate}/s for ${duration}"
((then_s == 0)) || phases+=", ${then_rate}/s for ${then}"
echo "# ${phases}, then none for ${after}; quota ${quota}m; ${cpu} CPU, ${mem} a request, ${base} base"
echo "# gauges (the app's /metrics) are read first, the cgroup right after; a gauge the app did not answer within 2 s is -"
echo "# user-s, sys-s: the app's process CPU time so far (user, kernel); faults: its minor page faults so far, in thousands; threads: its OS threads"
printf '%7s %9s %10s %12s %8s %8s %8s %8s %7s %7s %7s %7s %6s\n' seconds in-flight held-MiB working-MiB anon-MiB kmem-MiB goheap gostack user-s sys-s faults threads wait-s
clk_tck="$(getconf CLK_TCK)"
start="$(date +%s.%N)"
# Until the last phase's end: the load generator stops once its last
# request is answered or lost, the app may still be serving.
end="$(awk -v s="${start}" -v d="$((load_s + then_s + after_s))" 'BEGIN { printf "%.3f", s + d }')"
while kill -0 "${load}" 2>/dev/null || awk -v e="${end}" -v n="$(date +%s.%N)" 'BEGIN { exit !(n < e) }'; do
	t0="$(date +%s.%N)"
	m="$(curl -fsS --max-time 2 "http://127.0.0.1:$((port + 1))/metrics" 2>/dev/null || true)"
	t1="$(date +%s.%N)"
	inflight="$(awk '$1 == "aware_testapp_requests_in_flight" { print $2 }' <<<"${m}")"
	held="$(awk '$1 == "aware_testapp_memory_held_bytes" { printf "%.1f", $2 / 1048576 }' <<<"${m}")"
	ws="$(awk -v u="$(cat "${cg_mem}/${usage_file}")" -v k="${inactive}" '$1 == k { printf "%.1f", (u - $2) / 1048576 }' "${cg_mem}/memory.stat")"
	# What the working set is made of: anonymous memory (the requests'
	# mappings, the Go heap and stacks), the kernel's (v1's kmem; v2's
	# kernel, sock), and the Go runtime's own heap and stacks.
	anon="$(awk '$1 == "total_rss" || $1 == "anon" { printf "%.1f", $2 / 1048576; exit }' "${cg_mem}/memory.stat")"
	if [[ -f "${cg_mem}/memory.kmem.usage_in_bytes" ]]; then
		kmem="$(awk '{ printf "%.1f", $1 / 1048576 }' "${cg_mem}/memory.kmem.usage_in_bytes")"
	else
		kmem="$(awk '$1 == "kernel" || $1 == "sock" { n += $2 } END { printf "%.1f", n / 1048576 }' "${cg_mem}/memory.stat")"
	fi
	goheap="$(awk '$1 == "go_memstats_heap_inuse_bytes" { printf "%.1f", $2 / 1048576 }' <<<"${m}")"
	gostack="$(awk '$1 == "go_memstats_stack_inuse_bytes" { printf "%.1f", $2 / 1048576 }' <<<"${m}")"
	# Where the process's CPU goes: user time (the requests' work, the Go
	# runtime) against kernel time (page faults, syscalls), and how many
	# pages it has faulted in (a request's pages are touched in Hold).
	read -r user sys faults threads < <(awk -v hz="${clk_tck}" '{ printf "%.2f %.2f %.1f %d\n", $14 / hz, $15 / hz, $10 / 1000, $20 }' "/proc/${pids[0]}/stat" 2>/dev/null || echo "- - - -")
	printf '%7.1f %9s %10s %12s %8s %8s %8s %8s %7s %7s %7s %7s %6.1f\n' "$(awk -v a="${t1}" -v b="${start}" 'BEGIN { print a - b }')" \
		"${inflight:--}" "${held:--}" "${ws}" "${anon:--}" "${kmem:--}" "${goheap:--}" "${gostack:--}" "${user}" "${sys}" "${faults}" "${threads}" "$(awk -v a="${t1}" -v b="${t0}" 'BEGIN { print a - b }')"
	sleep 0.5
done
wait "${load}" || die "the load generator failed: $(tail -3 "${work}/loadgen.log")"
# The app's own counters against its process's CPU time: what share of
# the CPU the quota gave went to the requests' work (the rest: the Go
# runtime, the HTTP server, the kernel), and how many requests it served.
m="$(curl -fsS --max-time 5 "http://127.0.0.1:$((port + 1))/metrics" 2>/dev/null || true)"
served="$(awk '$1 ~ /^aware_testapp_requests_total[{]/ { n += $2 } END { printf "%d", n }' <<<"${m}")"
work_s="$(awk '$1 == "aware_testapp_cpu_seconds_total" { printf "%.2f", $2 }' <<<"${m}")"
proc_s="$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/${pids[0]}/stat" 2>/dev/null || true)"
echo "# served ${served:-?} requests; their work ${work_s:-?} s of CPU, the app's process ${proc_s:-?} s"
echo "# the load generator's windows, by the time a request was sent"
printf '%7s %7s %7s %7s %9s\n' from sent ok lost p95-s
while IFS= read -r line; do
	# One flat JSON object a line; the fields are numbers. A window with no
	# request answered has no p95 (printed -).
	for k in start sent ok lost p95; do
		v="$(grep -o "\"${k}\":[0-9.e+-]*" <<<"${line}" | head -1 | cut -d: -f2 || true)"
		printf -v "f_${k}" '%s' "${v:--}"
	done
	printf '%7s %7s %7s %7s %9s\n' "${f_start}" "${f_sent}" "${f_ok}" "${f_lost}" "${f_p95}"
done <"${work}/records.jsonl"
