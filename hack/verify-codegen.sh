#!/usr/bin/env bash
# Fails when any generated file differs from what `make generate` would
# write: regenerates into a scratch copy of the tree and compares.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/tools.sh"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "${SCRATCH}"' EXIT

# Copy the source tree (not build outputs or VCS data) so generators see the
# same inputs the repository holds.
tar -C "${AWARE_ROOT}" --exclude=./.git --exclude=./bin --exclude='./aware-demo-*' -cf - . | tar -C "${SCRATCH}" -xf -
"${AWARE_ROOT}/hack/update-codegen.sh" "${SCRATCH}" >/dev/null

status=0
for path in pkg/generated deploy/crd deploy/helm/aware/crds proto pkg/apis/autoscaling/v1alpha1/zz_generated.deepcopy.go; do
	if ! diff -ruN "${AWARE_ROOT}/${path}" "${SCRATCH}/${path}"; then
		status=1
	fi
done
if ((status)); then
	echo "generated files are out of date: run 'make generate' and commit the result" >&2
	exit 1
fi
echo "generated files are up to date"
