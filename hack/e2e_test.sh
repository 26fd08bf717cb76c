#!/usr/bin/env bash
# Tests that hack/e2e.sh and hack/e2e-repeat.sh leave alone a testbed they
# did not start: with a stand-in component running from AWARE_TESTBED_DIR,
# both must refuse, name it, and neither signal it nor remove its PID file;
# and that e2e-repeat.sh refuses a number of runs it cannot make. Needs no
# control plane. Run by `make check`.
set -euo pipefail

HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="$(mktemp -d)"
pid=""
# shellcheck disable=SC2317 # called through the trap
cleanup() {
	[[ -z "${pid}" ]] || kill "${pid}" 2>/dev/null || true
	rm -rf "${DIR}"
}
trap cleanup EXIT

mkdir -p "${DIR}/pids"
# The developer's "testbed": one long sleep recorded as its etcd, with the
# start time down.sh would check, so that a wrongful down.sh would stop it.
setsid sleep 300 </dev/null >/dev/null 2>&1 &
pid=$!
echo "${pid}" >"${DIR}/pids/etcd.pid"
awk '{ print $22 }' "/proc/${pid}/stat" >"${DIR}/pids/etcd.start"
printf 'export KUBECONFIG=%s/kubeconfig\n' "${DIR}" >"${DIR}/env"

fail=0
rc=0
out="$(AWARE_TESTBED_DIR="${DIR}" "${HACK}/e2e.sh" -run TestNothing 2>&1)" || rc=$?
expect() { # NAME CONDITION...
	local name="$1"
	shift
	if "$@"; then
		echo "ok   ${name}"
	else
		echo "FAIL ${name}; e2e.sh exited ${rc} and said:" >&2
		echo "${out}" >&2
		fail=1
	fi
}
expect "refuses" test "${rc}" -ne 0
expect "names the running component" grep -qF "etcd pid ${pid}" <<<"${out}"
expect "running testbed untouched" kill -0 "${pid}"
expect "PID file kept" test -s "${DIR}/pids/etcd.pid"
expect "env kept" test -s "${DIR}/env"

rc=0
out="$(AWARE_TESTBED_DIR="${DIR}" E2E_REPEAT_OUT="${DIR}/repeat" "${HACK}/e2e-repeat.sh" 2 2>&1)" || rc=$?
expect "e2e-repeat refuses" test "${rc}" -ne 0
expect "e2e-repeat names the running component" grep -qF "etcd pid ${pid}" <<<"${out}"
expect "e2e-repeat leaves the testbed running" kill -0 "${pid}"
expect "e2e-repeat ran nothing" test ! -e "${DIR}/repeat"
for n in 0 21 x; do
	rc=0
	out="$(AWARE_TESTBED_DIR="${DIR}/none" E2E_REPEAT_OUT="${DIR}/repeat" "${HACK}/e2e-repeat.sh" "${n}" 2>&1)" || rc=$?
	expect "e2e-repeat refuses ${n} runs" test "${rc}" -ne 0
	expect "e2e-repeat names the bad count ${n}" grep -qF "N ${n}:" <<<"${out}"
done
exit "${fail}"
