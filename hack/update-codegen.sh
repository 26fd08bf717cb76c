#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, clientset, listers, informers,
# apply configurations (k8s.io/code-generator), the CRD YAML
# (controller-gen) and the rl-agent protobuf/gRPC Go code (protoc).
# Usage: hack/update-codegen.sh [ROOT]  — ROOT defaults to the repository;
# hack/verify-codegen.sh passes a scratch copy.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
ROOT="${1:-${AWARE_ROOT}}"
MODULE="github.com/aware-k8s/aware"
API_PKG="${MODULE}/pkg/apis/autoscaling/v1alpha1"
OUT_PKG="${MODULE}/pkg/generated"
HEADER="${AWARE_ROOT}/hack/boilerplate.go.txt"

aware::tools::build
aware::tools::require_protoc
cd "${ROOT}"

# Generators read the module's packages; start from a clean slate so a
# removed type leaves no orphaned file behind.
rm -rf pkg/generated pkg/apis/autoscaling/v1alpha1/zz_generated.deepcopy.go deploy/crd/*.yaml

"${TOOLS_BIN}/deepcopy-gen" --go-header-file "${HEADER}" \
	--output-file zz_generated.deepcopy.go "${API_PKG}"

"${TOOLS_BIN}/applyconfiguration-gen" --go-header-file "${HEADER}" \
	--output-dir pkg/generated/applyconfiguration \
	--output-pkg "${OUT_PKG}/applyconfiguration" \
	--external-applyconfigurations "k8s.io/api/autoscaling/v1.CrossVersionObjectReference:k8s.io/client-go/applyconfigurations/autoscaling/v1,k8s.io/api/autoscaling/v2.MetricSpec:k8s.io/client-go/applyconfigurations/autoscaling/v2,k8s.io/api/autoscaling/v2.MetricStatus:k8s.io/client-go/applyconfigurations/autoscaling/v2,k8s.io/api/autoscaling/v2.HorizontalPodAutoscalerBehavior:k8s.io/client-go/applyconfigurations/autoscaling/v2,k8s.io/api/autoscaling/v2.MetricIdentifier:k8s.io/client-go/applyconfigurations/autoscaling/v2" \
	"${API_PKG}"

"${TOOLS_BIN}/client-gen" --go-header-file "${HEADER}" \
	--clientset-name versioned \
	--input-base "" --input "${API_PKG}" \
	--output-dir pkg/generated/clientset \
	--output-pkg "${OUT_PKG}/clientset" \
	--apply-configuration-package "${OUT_PKG}/applyconfiguration"

"${TOOLS_BIN}/lister-gen" --go-header-file "${HEADER}" \
	--output-dir pkg/generated/listers \
	--output-pkg "${OUT_PKG}/listers" \
	"${API_PKG}"

"${TOOLS_BIN}/informer-gen" --go-header-file "${HEADER}" \
	--versioned-clientset-package "${OUT_PKG}/clientset/versioned" \
	--listers-package "${OUT_PKG}/listers" \
	--output-dir pkg/generated/informers \
	--output-pkg "${OUT_PKG}/informers" \
	"${API_PKG}"

"${TOOLS_BIN}/controller-gen" crd:allowDangerousTypes=true \
	paths=./pkg/apis/... output:crd:artifacts:config=deploy/crd
(cd "${AWARE_ROOT}" && go run ./hack/crdbounds "${ROOT}"/deploy/crd/*.yaml)
# The Helm chart ships the same CRDs (helm installs crds/ before the rest).
rm -rf deploy/helm/aware/crds && mkdir -p deploy/helm/aware/crds && cp deploy/crd/*.yaml deploy/helm/aware/crds/

# protoc: paths are relative to proto/ so the descriptor names match the
# package layout other-language agents will use.
find proto -name '*.pb.go' -delete
mapfile -t protos < <(cd proto && find . -name '*.proto' | sed 's|^\./||' | sort)
if ((${#protos[@]})); then
	PATH="${TOOLS_BIN}:${PATH}" protoc -I proto \
		--go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative \
		"${protos[@]}"
fi
