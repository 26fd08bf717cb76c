#!/usr/bin/env bash
# Tests hack/install-deps.sh --check against a stand-in dpkg-query, so the
# check is known to fail loudly, naming the package, whatever this machine
# has installed. Run by `make check`.
set -euo pipefail

HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STUB="$(mktemp -d)"
trap 'rm -rf "${STUB}"' EXIT

# The stand-in reports every package installed except those in $ABSENT.
cat >"${STUB}/dpkg-query" <<'STUBEOF'
#!/usr/bin/env bash
name="${!#}"
for a in ${ABSENT:-}; do
	if [[ "$a" == "$name" ]]; then
		echo "dpkg-query: no packages found matching $name" >&2
		exit 1
	fi
done
printf installed
STUBEOF
chmod +x "${STUB}/dpkg-query"

# A stand-in promtool; PROMTOOL says which one the check is given.
printf '#!/bin/sh\n' >"${STUB}/promtool"
chmod +x "${STUB}/promtool"
PROMTOOL="${STUB}/promtool"

fail=0
check() { # NAME ABSENT WANT_RC WANT_TEXT
	local out rc=0
	out="$(ABSENT="$2" AWARE_PROMTOOL="${PROMTOOL}" PATH="${STUB}:${PATH}" "${HACK}/install-deps.sh" --check 2>&1)" || rc=$?
	if [[ "${rc}" != "$3" ]] || ! grep -qF -- "$4" <<<"${out}"; then
		echo "FAIL $1: exit ${rc} (want $3), output lacks '$4':" >&2
		echo "${out}" >&2
		fail=1
	else
		echo "ok   $1"
	fi
}

check "all present" "" 0 "dependencies present"
check "well-known protos missing" "libprotobuf-dev" 1 "libprotobuf-dev: google/protobuf"
check "two missing, both named" "protobuf-compiler jq" 1 "jq: the e2e testbed"
check "two missing, first named" "protobuf-compiler jq" 1 "protobuf-compiler: protoc"
PROMTOOL="${STUB}/no-promtool"
check "promtool missing" "" 1 "MISSING promtool: run hack/install-deps.sh"
exit "${fail}"
