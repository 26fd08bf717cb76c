#!/usr/bin/env bash
# Installs what a fresh machine lacks for `make verify` and `make lint`:
# Debian's protobuf-compiler (protoc) and the pinned Go tools. Idempotent:
# does nothing that is already done. The unit tests need only Go.
set -euo pipefail

if ! command -v protoc >/dev/null 2>&1; then
	echo "installing protobuf-compiler (protoc)"
	SUDO=""
	if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
	# Try without refreshing the package lists first: it is faster and
	# works on machines whose lists are current.
	if ! ${SUDO} apt-get install -y --no-install-recommends protobuf-compiler >/dev/null 2>&1; then
		${SUDO} apt-get update >/dev/null
		${SUDO} apt-get install -y --no-install-recommends protobuf-compiler >/dev/null
	fi
fi
protoc --version

source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
aware::tools::build
