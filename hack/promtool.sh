#!/usr/bin/env bash
# Prints the path of promtool, Prometheus's rule checker, taken from
# Debian's prometheus package (the version the testbed runs, from
# hack/testbed/lib.sh) without installing it: apt-get download and
# dpkg-deb -x, cached under ${AWARE_CACHE:-$HOME/.cache/aware}/promtool/<version>.
#
#   hack/promtool.sh          download it if it is not cached; print its path
#   hack/promtool.sh --check  print its path if cached; else exit 1
#
# AWARE_PROMTOOL names a promtool to use instead (hack/install-deps_test.sh
# sets it to a stand-in).
set -euo pipefail

# shellcheck source=testbed/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/testbed/lib.sh"

dir="${AWARE_CACHE:-${HOME}/.cache/aware}/promtool/${PROMETHEUS_DEB_VERSION//\*/x}"

found() {
	if [[ -n "${AWARE_PROMTOOL:-}" ]]; then
		[[ -x "${AWARE_PROMTOOL}" ]] && printf '%s\n' "${AWARE_PROMTOOL}"
		return
	fi
	[[ -x "${dir}/promtool" ]] && printf '%s\n' "${dir}/promtool"
}

fetch() {
	local work
	work="$(mktemp -d)"
	# shellcheck disable=SC2064 # expand now: work is local
	trap "rm -rf '${work}'" EXIT
	local apt_get=(apt-get -q -o APT::Sandbox::User=root download "prometheus=${PROMETHEUS_DEB_VERSION}")
	if ! (cd "${work}" && "${apt_get[@]}" >&2); then
		echo "apt-get download failed; refreshing package lists and retrying" >&2
		apt-get -q update >&2 || true
		(cd "${work}" && "${apt_get[@]}" >&2) || {
			echo "cannot download prometheus=${PROMETHEUS_DEB_VERSION} from Debian; set AWARE_PROMETHEUS_DEB_VERSION to an available version" >&2
			return 1
		}
	fi
	local deb
	deb="$(find "${work}" -maxdepth 1 -name 'prometheus_*.deb' -print -quit)"
	[[ -n "${deb}" ]] || { echo "apt-get download produced no prometheus .deb" >&2; return 1; }
	dpkg-deb -x "${deb}" "${work}/root"
	[[ -x "${work}/root/usr/bin/promtool" ]] || { echo "$(basename "${deb}") has no usr/bin/promtool" >&2; return 1; }
	# Renamed into place only when complete, so an interrupted fetch never
	# leaves a cache that looks usable.
	mkdir -p "$(dirname "${dir}")"
	install -m 0755 "${work}/root/usr/bin/promtool" "${work}/promtool"
	mkdir -p "${work}/out" && mv "${work}/promtool" "${work}/out/"
	rm -rf "${dir}" && mv "${work}/out" "${dir}"
	local v
	v="$("${dir}/promtool" --version 2>&1)"
	echo "promtool: ${v%%$'\n'*} from $(basename "${deb}")" >&2
}

case "${1:-}" in
--check)
	found || { echo "MISSING promtool: run hack/install-deps.sh (or hack/promtool.sh), which takes it from Debian's prometheus package" >&2; exit 1; }
	;;
"")
	found || { fetch && found; }
	;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac
