#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks for every tier of `make check`
# (unit tests, `make verify`, `make lint`, `make fuzz`, `make e2e`), then
# checks each Debian package by name and fails naming the missing ones.
# Idempotent: installs only what dpkg does not already report installed.
#
#   hack/install-deps.sh          install what is missing, then check
#   hack/install-deps.sh --check  only check; exit 1 naming what is missing
#
# Go 1.26 itself is the one prerequisite it does not install.
set -euo pipefail

# Every Debian package the project's scripts and tests use, with why. The
# check reads dpkg's status for each name, not whether some command happens
# to be on the PATH: a protoc without libprotobuf-dev's well-known types
# passes `command -v protoc` and still fails `make verify`.
AWARE_DEB_PACKAGES=(
	"protobuf-compiler:protoc, for make generate/verify (proto/)"
	"libprotobuf-dev:google/protobuf/*.proto (timestamp, duration) that proto/ imports"
	"gcc:cgo for go test -race"
	"libc6-dev:C headers for cgo (go test -race)"
	"make:the Makefile"
	"git:make's version stamp and go's VCS stamping"
	"openssl:the e2e testbed's certificates"
	"curl:the e2e testbed's readiness probes"
	"jq:the e2e testbed's module look-ups"
	"iproute2:ss, the e2e testbed's port check"
	"util-linux:setsid, the e2e testbed's process groups"
	"procps:the e2e testbed's process checks"
	"ca-certificates:TLS to the Go module proxy"
)

# aware::deps::installed NAME: 0 when dpkg reports NAME installed. dpkg-query
# is looked up on the PATH so the test (hack/install-deps_test.sh) can stand
# in for it.
aware::deps::installed() {
	[[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == "installed" ]]
}

# aware::deps::missing prints the name of each package not installed.
aware::deps::missing() {
	local entry
	for entry in "${AWARE_DEB_PACKAGES[@]}"; do
		aware::deps::installed "${entry%%:*}" || printf '%s\n' "${entry%%:*}"
	done
}

aware::deps::check() {
	local missing=() name entry
	mapfile -t missing < <(aware::deps::missing)
	if ((${#missing[@]} > 0)); then
		echo "MISSING Debian packages (run hack/install-deps.sh, or apt-get install them):" >&2
		for name in "${missing[@]}"; do
			for entry in "${AWARE_DEB_PACKAGES[@]}"; do
				[[ "${entry%%:*}" == "${name}" ]] && echo "  ${name}: ${entry#*:}" >&2
			done
		done
		return 1
	fi
	if ! command -v go >/dev/null 2>&1; then
		echo "MISSING go: install Go 1.26 (https://go.dev/dl) and put it on the PATH" >&2
		return 1
	fi
	# promtool (make rules) comes from Debian's prometheus package without
	# installing it: hack/promtool.sh caches it by version.
	if ! "$(dirname "${BASH_SOURCE[0]}")/promtool.sh" --check >/dev/null; then
		return 1
	fi
	echo "dependencies present: ${#AWARE_DEB_PACKAGES[@]} Debian packages, promtool, $(go version)"
}

aware::deps::install() {
	local missing=()
	mapfile -t missing < <(aware::deps::missing)
	((${#missing[@]} > 0)) || return 0
	local sudo=()
	[[ "$(id -u)" == 0 ]] || sudo=(sudo)
	echo "installing Debian packages: ${missing[*]}"
	# Refresh the lists first: on a brand-new machine they are empty or old,
	# and an install from stale lists fails with 404s.
	"${sudo[@]}" apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

main() {
	case "${1:-}" in
	--check)
		aware::deps::check
		;;
	"")
		aware::deps::install
		"$(dirname "${BASH_SOURCE[0]}")/promtool.sh" >/dev/null
		aware::deps::check
		protoc --version
		# shellcheck source=tools.sh source-path=SCRIPTDIR
		source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
		aware::tools::build
		;;
	*)
		echo "usage: $0 [--check]" >&2
		return 2
		;;
	esac
}

main "$@"
