# shellcheck shell=bash
# KWOK's configuration for the testbed: the Stages that play each fake pod's
# kubelet, and the usage its resource metrics report. Sourced by up.sh, which
# sets CONF; never run.

# pod_stage NAME PHASE writes what the testbed's Pod stages share: a Stage
# named NAME for the pods in PHASE that are not being deleted. Each stage
# goes on with its own selector expressions and its next status.
pod_stage() {
	cat <<-EOF
		apiVersion: kwok.x-k8s.io/v1alpha1
		kind: Stage
		metadata:
		  name: $1
		spec:
		  resourceRef:
		    apiGroup: v1
		    kind: Pod
		  selector:
		    matchExpressions:
		    - key: '.metadata.deletionTimestamp'
		      operator: 'DoesNotExist'
		    - key: '.status.phase'
		      operator: 'In'
		      values:
		      - '$2'
	EOF
}

# Containers in KWOK's bundled stages report no resources and no
# observedGeneration, and the apiserver refuses a resize of a running pod
# whose statuses lack resources (it takes that as a kubelet without resize
# support). This stage acts as the kubelet's side of a resize: whenever a
# running pod's spec generation is ahead of what its status has observed, it
# reports the spec's resources as allocated and applied, keeping each
# container's restart count, start time and last state (a kubelet keeps
# them through a resize; the workload emulator reports an OOM kill in
# lastState and restartCount, which the recommender reads).
write_resize_stage() {
	{
		pod_stage aware-pod-resources Running
		cat <<-'EOF'
		    - key: '(.status.observedGeneration // 0) == (.metadata.generation // 0)'
		      operator: 'In'
		      values:
		      - 'false'
		    - key: '.metadata.annotations["aware.dev/e2e-resize"]'
		      operator: 'DoesNotExist'
		  next:
		    statusTemplate: |
		      {{ $now := Now }}
		      {{ $statuses := .status.containerStatuses }}
		      observedGeneration: {{ .metadata.generation }}
		      containerStatuses:
		      {{ range $c := .spec.containers }}
		      {{ $restarts := 0 }}
		      {{ $started := $now }}
		      {{ $last := dict }}
		      {{ range $s := $statuses }}
		      {{ if eq $s.name $c.name }}
		      {{ $restarts = $s.restartCount }}
		      {{ with $s.state }}{{ with .running }}{{ $started = .startedAt }}{{ end }}{{ end }}
		      {{ with $s.lastState }}{{ $last = . }}{{ end }}
		      {{ end }}
		      {{ end }}
		      {{ $res := $c.resources | default dict }}
		      - image: {{ $c.image | Quote }}
		        name: {{ $c.name | Quote }}
		        ready: true
		        started: true
		        restartCount: {{ $restarts }}
		        state:
		          running:
		            startedAt: {{ $started | Quote }}
		        lastState: {{ $last | toJson }}
		        allocatedResources: {{ get $res "requests" | default dict | toJson }}
		        resources: {{ $res | toJson }}
		      {{ end }}
	EOF
	} >"${CONF}/kwok/stage/aware-pod-resources.yaml"
}

# A kubelet does not apply every resize: one that does not fit the node now
# is Deferred (retried as room frees up), one that can never fit Infeasible
# (Kubernetes 1.33+ says so in the pod's PodResizePending condition, with
# that reason). The resize stage above applies every one, so a pod whose
# annotation aware.dev/e2e-resize is Deferred or Infeasible gets this stage
# instead: the spec's resize is observed (observedGeneration, so the stage
# plays once per resize) but not applied (containerStatuses keep the old
# resources), and PodResizePending is True with the annotation as its
# reason. The e2e tests put the annotation in a pod template to see what
# the updater does with each answer.
write_resize_refused_stage() {
	{
		pod_stage aware-pod-resize-refused Running
		cat <<-'EOF'
		    - key: '(.status.observedGeneration // 0) == (.metadata.generation // 0)'
		      operator: 'In'
		      values:
		      - 'false'
		    - key: '.metadata.annotations["aware.dev/e2e-resize"]'
		      operator: 'In'
		      values:
		      - 'Deferred'
		      - 'Infeasible'
		  next:
		    statusTemplate: |
		      {{ $now := Now }}
		      {{ $answer := index .metadata.annotations "aware.dev/e2e-resize" }}
		      observedGeneration: {{ .metadata.generation }}
		      conditions:
		      {{ range .status.conditions }}
		      {{ if ne .type "PodResizePending" }}
		      - {{ . | toJson }}
		      {{ end }}
		      {{ end }}
		      - type: PodResizePending
		        status: "True"
		        reason: {{ $answer | Quote }}
		        message: {{ printf "the testbed answers every resize of this pod %s (annotation aware.dev/e2e-resize)" $answer | Quote }}
		        lastTransitionTime: {{ $now | Quote }}
		        observedGeneration: {{ .metadata.generation }}
	EOF
	} >"${CONF}/kwok/stage/aware-pod-resize-refused.yaml"
}

# A kubelet posts its pods' readiness again when it reaches the API server
# after an outage; KWOK's bundled pod-ready stage only readies Pending pods.
# After an API or etcd outage longer than the node lease's grace,
# kube-controller-manager marks the node NodeStatusUnknown and its Running
# pods Ready=False, and without this stage they stayed unready for good (a
# workload emulator then served no requests from them). It marks such a pod
# Ready again, as its kubelet would.
write_ready_again_stage() {
	{
		pod_stage aware-pod-ready-again Running
		cat <<-'EOF'
		    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
		      operator: 'NotIn'
		      values:
		      - 'True'
		  next:
		    statusTemplate: |
		      {{ $now := Now }}
		      conditions:
		      - lastTransitionTime: {{ $now | Quote }}
		        status: "True"
		        type: Ready
		      - lastTransitionTime: {{ $now | Quote }}
		        status: "True"
		        type: ContainersReady
	EOF
	} >"${CONF}/kwok/stage/aware-pod-ready-again.yaml"
}

# Pod CPU/memory usage for KWOK's kubelet-style metrics, read from annotations
# so that a workload emulator can drive it with a plain pod PATCH. A
# per-container annotation (suffix ".<container>") wins over the pod-wide one,
# which, as in KWOK's own example, applies to every container.
write_usage() {
	local r q
	{
		cat <<-'EOF'
			apiVersion: kwok.x-k8s.io/v1alpha1
			kind: ClusterResourceUsage
			metadata:
			  name: aware-usage-from-annotation
			spec:
			  usages:
			  - usage:
		EOF
		for r in cpu memory; do
			if [[ "${r}" == cpu ]]; then q=1m; else q=1Mi; fi
			cat <<-EOF
				      ${r}:
				        expression: |
				          ("kwok.x-k8s.io/usage-${r}." + container.name) in pod.metadata.annotations
				          ? Quantity(pod.metadata.annotations["kwok.x-k8s.io/usage-${r}." + container.name])
				          : "kwok.x-k8s.io/usage-${r}" in pod.metadata.annotations
				          ? Quantity(pod.metadata.annotations["kwok.x-k8s.io/usage-${r}"])
				          : Quantity("${q}")
			EOF
		done
	} >"${CONF}/kwok/usage.yaml"
}


# KWOK's bundled pod-ready stage, with what the resize stage above adds: each
# container's spec resources as allocated and applied, and observedGeneration.
# With the bundled one every new pod took two status patches, pod-ready's and
# then aware-pod-resources' (a new pod's status has observed no generation);
# this one brings a pod to Running in one, so the resize stage plays only on
# a resize. It replaces pod-ready.yaml from KWOK's module; the rest is that
# stage's template as KWOK v0.8.0 ships it.
write_pod_ready_stage() {
	rm -f "${CONF}/kwok/stage/pod-ready.yaml"
	{
		pod_stage aware-pod-ready Pending
		cat <<-'EOF'
		    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
		      operator: 'NotIn'
		      values:
		      - 'True'
		  next:
		    statusTemplate: |
		      {{ $now := Now }}
		      {{ with .metadata.generation }}
		      observedGeneration: {{ . }}
		      {{ end }}
		      conditions:
		      - lastTransitionTime: {{ $now | Quote }}
		        status: "True"
		        type: Initialized
		      - lastTransitionTime: {{ $now | Quote }}
		        status: "True"
		        type: Ready
		      - lastTransitionTime: {{ $now | Quote }}
		        status: "True"
		        type: ContainersReady
		      {{ range .spec.readinessGates }}
		      - lastTransitionTime: {{ $now | Quote }}
		        status: "True"
		        type: {{ .conditionType | Quote }}
		      {{ end }}

		      containerStatuses:
		      {{ range .spec.containers }}
		      {{ $res := .resources | default dict }}
		      - image: {{ .image | Quote }}
		        name: {{ .name | Quote }}
		        ready: true
		        started: true
		        restartCount: 0
		        state:
		          running:
		            startedAt: {{ $now | Quote }}
		        allocatedResources: {{ get $res "requests" | default dict | toJson }}
		        resources: {{ $res | toJson }}
		      {{ end }}

		      initContainerStatuses:
		      {{ range .spec.initContainers }}
		      - image: {{ .image | Quote }}
		        name: {{ .name | Quote }}
		        ready: true
		        restartCount: 0
		        {{ if eq .restartPolicy "Always" }}
		        started: true
		        state:
		          running:
		            startedAt: {{ $now | Quote }}
		        {{ else }}
		        state:
		          terminated:
		            exitCode: 0
		            finishedAt: {{ $now | Quote }}
		            reason: Completed
		            startedAt: {{ $now | Quote }}
		        {{ end }}
		      {{ end }}
		      {{ $hostIPs := NodeIPsWith .spec.nodeName }}
		      {{ with $hostIPs }}
		      hostIP: {{ index . 0 | Quote }}
		      hostIPs:
		      {{ range . }}
		      - ip: {{ . | Quote }}
		      {{ end }}
		      {{ end }}
		      {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
		      {{ with $podIPs }}
		      podIP: {{ index . 0 | Quote }}
		      podIPs:
		      {{ range . }}
		      - ip: {{ . | Quote }}
		      {{ end }}
		      {{ end }}
		      phase: Running
		      startTime: {{ $now | Quote }}
	EOF
	} >"${CONF}/kwok/stage/aware-pod-ready.yaml"
}

# KWOK plays pod stages with podPlayStageParallelism workers (4 by default),
# each waiting for its status patch to come back. On this shared 2-core
# machine, under load, 4 workers brought 2-4 pods per second to Running: at
# 5,000 targets (10,000 pods) KWOK made 4.1 pod status patches per second
# with 3,200 pods bound and waiting, its workers blocked on their requests
# and the CPU not saturated, and 51.5 per second on the same testbed a minute
# after a restart with 32 workers (docs/results/performance.md). KWOK v0.8.0 does
# not default the fields of a KwokConfiguration it is given (without
# nodeLeaseParallelism it refuses to start), so every option that has a
# default is stated, at that default except the pod workers.
write_kwok_config() {
	cat >"${CONF}/kwok/kwok.yaml" <<-EOF
		apiVersion: config.kwok.x-k8s.io/v1alpha1
		kind: KwokConfiguration
		options:
		  cidr: 10.0.0.0/24
		  enableDebuggingHandlers: true
		  enableContentionProfiling: false
		  enableProfilingHandler: true
		  podPlayStageParallelism: ${KWOK_POD_WORKERS}
		  nodePlayStageParallelism: 4
		  nodeLeaseParallelism: 4
		  podsOnNodeSyncParallelism: 1
		  enablePodsOnNodeSyncListPager: true
		  enablePodsOnNodeSyncStreamWatch: false
	EOF
}
