#!/usr/bin/env bash
# The what-if's scale benchmark (make bench-whatif; docs/whatif.md): 7 days
# of history of 100 workloads at one minute, read, fitted and replayed.
#
#  1. Generates the history (go run ./hack/benchwhatif): cAdvisor's CPU
#     counter and working set, kube-state-metrics' replicas and requests, a
#     request counter per workload, as OpenMetrics, and workloads.json.
#  2. Backfills it with the testbed's promtool
#     (promtool tsdb create-blocks-from openmetrics).
#  3. Starts the testbed's Prometheus (the Debian build hack/testbed/build.sh
#     caches) on that TSDB, on port AWARE_TESTBED_BASE_PORT+8, with a
#     retention that keeps the week: the running testbed's Prometheus keeps
#     one day (hack/testbed/up.sh), which would drop six of the seven.
#  4. Runs the what-if over every workload
#     (go test -tags benchwhatif -run TestBenchWhatif ./recommender/app), as
#     `recommender whatif` does minus listing the Deployments, and prints the
#     wall time, the range queries and the points; stops Prometheus.
#
# Knobs: BENCH_WHATIF_DIR (default /tmp/aware-bench-whatif; the history,
# TSDB and outputs, about 3 GB while it runs), BENCH_WHATIF_WORKLOADS (100),
# BENCH_WHATIF_DAYS (7), BENCH_WHATIF_GZIP=1 or 0 (--prometheus-gzip=true or false; unset, the command's default), BENCH_WHATIF_KEEP=1 keeps the generated history and
# TSDB of a previous run with the same knobs (only step 4 is run again).
# Slow to set up (minutes), not part of make check.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=testbed/lib.sh
source "${ROOT}/hack/testbed/lib.sh"

DIR="${BENCH_WHATIF_DIR:-/tmp/aware-bench-whatif}"
WORKLOADS="${BENCH_WHATIF_WORKLOADS:-100}"
DAYS="${BENCH_WHATIF_DAYS:-7}"
PORT=$((BASE_PORT + 8))
KEY="${WORKLOADS}x${DAYS}d"

install="$("${ROOT}/hack/testbed/build.sh")"
BIN="${install}/bin"
[[ -x "${BIN}/prometheus" && -x "${BIN}/promtool" ]] || die "no prometheus/promtool in ${BIN}"

mkdir -p "${DIR}"
if [[ "${BENCH_WHATIF_KEEP:-0}" != 1 || "$(cat "${DIR}/key" 2>/dev/null)" != "${KEY}" || ! -d "${DIR}/data" ]]; then
	rm -rf "${DIR:?}/data" "${DIR}/history.om" "${DIR}/key"
	t="$(now)"
	(cd "${ROOT}" && go run ./hack/benchwhatif --out "${DIR}" --workloads "${WORKLOADS}" --days "${DAYS}")
	log "generated $(du -h "${DIR}/history.om" | cut -f1) of OpenMetrics in $(elapsed "${t}")s"
	t="$(now)"
	# Blocks as long as the history (the longest range promtool offers
	# below it is 162h): promtool reads the whole input once per block
	# range, so 2-hour blocks would parse it 84 times.
	"${BIN}/promtool" tsdb create-blocks-from openmetrics --max-block-duration=486h \
		"${DIR}/history.om" "${DIR}/data" >"${DIR}/promtool.log"
	log "backfilled $(du -sh "${DIR}/data" | cut -f1) of TSDB blocks in $(elapsed "${t}")s"
	rm -f "${DIR}/history.om"
	printf '%s\n' "${KEY}" >"${DIR}/key"
fi
rm -rf "${DIR}/out"

# Nothing to scrape: it only serves the backfilled blocks.
printf 'global: {}\n' >"${DIR}/prometheus.yml"
"${BIN}/prometheus" --config.file "${DIR}/prometheus.yml" --storage.tsdb.path "${DIR}/data" \
	--storage.tsdb.retention.time 60d --web.listen-address "127.0.0.1:${PORT}" \
	>"${DIR}/prometheus.log" 2>&1 &
prom=$!
trap 'kill "${prom}" 2>/dev/null || true; wait "${prom}" 2>/dev/null || true' EXIT
for _ in $(seq 120); do
	if [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${PORT}/-/ready")" == 200 ]]; then
		break
	fi
	kill -0 "${prom}" 2>/dev/null || die "prometheus exited; see ${DIR}/prometheus.log"
	sleep 1
done
log "prometheus ready on 127.0.0.1:${PORT} (pid ${prom})"

cd "${ROOT}"
AWARE_BENCH_WHATIF_PROMETHEUS="http://127.0.0.1:${PORT}" AWARE_BENCH_WHATIF_PROMETHEUS_PID="${prom}" AWARE_BENCH_WHATIF_DIR="${DIR}" AWARE_BENCH_WHATIF_GZIP="${BENCH_WHATIF_GZIP:-}" \
	go test -tags benchwhatif -count=1 -timeout 30m -v -run '^TestBenchWhatif$' \
	-cpuprofile "${DIR}/cpu.pprof" -o "${DIR}/app.test" ./recommender/app/
log "report: ${DIR}/report.txt; outputs: ${DIR}/out; the what-if's CPU profile: go tool pprof ${DIR}/app.test ${DIR}/cpu.pprof"
