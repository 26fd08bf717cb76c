#!/usr/bin/env bash
# Builds the pinned generator and lint tools from hack/tools/go.mod into
# bin/tools, so every run of `make generate`/`make verify`/`make lint` uses
# exactly the versions that go.mod names. Sourced by the other hack scripts.
set -euo pipefail

AWARE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_BIN="${AWARE_ROOT}/bin/tools"

aware::tools::build() {
	mkdir -p "${TOOLS_BIN}"
	# go build is incremental: with a warm cache this costs a second.
	(cd "${AWARE_ROOT}/hack/tools" && GOWORK=off GOFLAGS= go build -o "${TOOLS_BIN}/" \
		sigs.k8s.io/controller-tools/cmd/controller-gen \
		k8s.io/code-generator/cmd/deepcopy-gen \
		k8s.io/code-generator/cmd/client-gen \
		k8s.io/code-generator/cmd/lister-gen \
		k8s.io/code-generator/cmd/informer-gen \
		k8s.io/code-generator/cmd/applyconfiguration-gen \
		google.golang.org/protobuf/cmd/protoc-gen-go \
		google.golang.org/grpc/cmd/protoc-gen-go-grpc \
		honnef.co/go/tools/cmd/staticcheck)
}

# helm and kustomize, for the chart's lint and the comparison of the chart
# with deploy/ (make chart). They live in their own module, hack/tools/deploy:
# helm needs newer Kubernetes libraries than the generators are pinned to.
# Cold, this build takes about 2 CPU-minutes; warm, a second.
aware::tools::build_deploy() {
	mkdir -p "${TOOLS_BIN}"
	(cd "${AWARE_ROOT}/hack/tools/deploy" && GOWORK=off GOFLAGS= go build -o "${TOOLS_BIN}/" \
		helm.sh/helm/v3/cmd/helm \
		sigs.k8s.io/kustomize/kustomize/v5)
}

# protoc comes from Debian's protobuf-compiler; its version is written into
# every generated file, so a different protoc shows up in `make verify`.
aware::tools::require_protoc() {
	if ! command -v protoc >/dev/null 2>&1; then
		echo "protoc not found: run hack/install-deps.sh (installs Debian's protobuf-compiler)" >&2
		return 1
	fi
}
