# shellcheck shell=bash
# The variables are used by the scripts that source this file.
# shellcheck disable=SC2034
# Settings of the real node (containerd, runc and a kubelet) that
# hack/node/up.sh joins to a running loopback testbed; sourced, never run.

# shellcheck source=../testbed/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../testbed/lib.sh"

NODE_NAME="${AWARE_NODE_NAME:-aware-real-node}"
NODE_DIR="${TESTBED_DIR}/node"
NODE_PIDS="${NODE_DIR}/pids"
NODE_LOGS="${NODE_DIR}/logs"
CONTAINERD_SOCK="${NODE_DIR}/containerd.sock"
# The testbed uses BASE_PORT+0..+7; the kubelet takes the next two.
KUBELET_PORT=$((BASE_PORT + 8))
KUBELET_HEALTHZ_PORT=$((BASE_PORT + 9))
# The node's components in start order; down.sh stops them in reverse.
NODE_COMPONENTS=(containerd kubelet)
# containerd's namespace for the images the kubelet sees.
CRI_NAMESPACE=k8s.io

# Debian packages the node runs on: name:why.
NODE_DEB_PACKAGES=(
	"containerd:the node's container runtime (CRI)"
	"runc:the OCI runtime containerd starts containers with"
)

node_ctr() {
	ctr --address "${CONTAINERD_SOCK}" --namespace "${CRI_NAMESPACE}" "$@"
}

# node_ours NAME PID: PID is alive and is the process recorded for NAME
# (same start time), so a recycled PID is never signalled.
node_ours() {
	local name="$1" pid="$2" got
	pid_alive "${pid}" || return 1
	[[ -s "${NODE_PIDS}/${name}.start" ]] || return 0
	got="$(awk '{ print $22 }' "/proc/${pid}/stat" 2>/dev/null)" || return 1
	[[ "${got}" == "$(cat "${NODE_PIDS}/${name}.start")" ]]
}
