package fusion

import (
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// saturation says whether the pods run at their CPU limit (rule 11 of the
// package documentation). A pod at its limit shows the limit, not its
// demand: the usage the histograms and the HPA arithmetic read is a lower
// bound of what the pods need.
type saturation struct {
	// pods: the mean usage of the pods with metrics, ready or not, is at
	// least saturatedUtilisation of the pod's CPU limit. The CPU request
	// is then never lowered: a window at the limit says nothing about how
	// much less the pods could do with.
	pods bool
	// serving: the same of the pods that serve — Ready ones, and ones that
	// lost readiness after becoming Ready in their current start (a probe
	// timing out under load). Pods still starting are left out, as the
	// HPA leaves them out, so that a runtime burning its limit at start
	// does not scale the workload out. The replica count then rises by at
	// least one.
	serving bool
}

// cpuSaturation reads rule 11's conditions from the observation. Without
// a CPU limit on every controlled container nothing is saturated: usage
// above the request is then demand the HPA arithmetic sees.
func cpuSaturation(obs *workload.Observation) saturation {
	limit := 0.0
	for _, co := range obs.Containers {
		if !(co.Limits.CPU > 0) {
			return saturation{}
		}
		limit += co.Limits.CPU
	}
	if obs.Samples == 0 || !(limit > 0) {
		return saturation{}
	}
	at := saturatedUtilisation * limit
	if len(obs.Pods) == 0 {
		// A reader without per-pod samples: the containers' mean over pods
		// with metrics, which serve when any pod is ready.
		u := 0.0
		for _, co := range obs.Containers {
			u += co.Usage.CPU
		}
		return saturation{pods: u >= at, serving: u >= at && obs.ReadyReplicas > 0}
	}
	var all, serve float64
	var nAll, nServe int
	for _, p := range obs.Pods {
		if !p.HasMetrics {
			continue
		}
		all += p.Usage.CPU
		nAll++
		if p.Ready || lostReadiness(p) {
			serve += p.Usage.CPU
			nServe++
		}
	}
	return saturation{
		pods:    nAll > 0 && all >= at*float64(nAll),
		serving: nServe > 0 && serve >= at*float64(nServe),
	}
}

// unstarted reports whether a pod of the observation has not started: not
// Ready, no usage, no container start (unscheduled, or its containers not
// yet running), or not created yet (fewer pods than the replicas asked
// for: on the real node the default asked 2 → 3 pods while saturated and,
// one loop later, before the ReplicaSet had created the third, one more
// again; docs/real-node-rounds.md, round twenty-five). Without per-pod
// samples nothing is known to wait.
func unstarted(obs *workload.Observation) bool {
	if n := int32(len(obs.Pods)); n > 0 && n < obs.Replicas {
		return true
	}
	for _, p := range obs.Pods {
		if !p.Ready && !p.HasMetrics && p.Started.IsZero() {
			return true
		}
	}
	return false
}

// deferralSettle is how long a deferred resize must have waited before the
// replica count sheds for it (rule 12): the kubelet retries a deferred
// resize whenever a pod leaves the node, so a deferral that lasts a minute
// is the node's lack of room, not a replacement in transit.
const deferralSettle = time.Minute

// resizeDeferred reports whether the node has deferred the resize of some
// pod of the observation for at least deferralSettle.
func resizeDeferred(obs *workload.Observation) bool {
	for _, p := range obs.Pods {
		if !p.ResizeDeferredSince.IsZero() && obs.Time.Sub(p.ResizeDeferredSince) >= deferralSettle {
			return true
		}
	}
	return false
}

// lostReadiness reports whether an unready pod was Ready since its
// containers last started: its Ready condition changed after the start.
func lostReadiness(p workload.PodSample) bool {
	return !p.Ready && !p.Started.IsZero() && p.ReadySince.After(p.Started)
}

// holdCPU keeps every controlled CPU target at least at the container's
// current request (rule 11): the pods are at their limit.
func (f *Fused) holdCPU(obs *workload.Observation, containers []workload.ContainerRecommendation) {
	for i := range containers {
		co, ok := obs.Container(containers[i].Name)
		if !ok {
			continue
		}
		if p := f.c.ContainerPolicy(co.Name); !p.Controls(workload.CPU) {
			continue
		}
		containers[i].Target.CPU = max(containers[i].Target.CPU, co.Requests.CPU)
	}
}

// holdYoung keeps the targets of a container whose history is shorter than
// Options.ShrinkAfter at least at its current requests (rule 5): the first
// windows of usage, which on a real cluster still hold the idle start in
// metrics-server's window, are no measure of the pods' need. Raises pass.
func (f *Fused) holdYoung(obs *workload.Observation, containers []workload.ContainerRecommendation) {
	young := f.opts.ShrinkAfter.Hours() / 24
	for i := range containers {
		co, ok := obs.Container(containers[i].Name)
		if !ok || f.rec.State(co.Name).Confidence() >= young {
			continue
		}
		p := f.c.ContainerPolicy(co.Name)
		for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
			if p.Controls(r) {
				containers[i].Target = containers[i].Target.With(r, max(containers[i].Target.Get(r), co.Requests.Get(r)))
			}
		}
	}
}
