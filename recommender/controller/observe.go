package controller

import (
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// Reasons a usage sample is dropped; they label the invalid-samples counter.
const (
	dropNaN      = "nan"
	dropInfinite = "infinite"
	dropNegative = "negative"
)

// sampleProblem returns why x cannot be used, or "".
func sampleProblem(x float64) string {
	switch {
	case math.IsNaN(x):
		return dropNaN
	case math.IsInf(x, 0):
		return dropInfinite
	case x < 0:
		return dropNegative
	}
	return ""
}

// activePods keeps the pods that count towards the workload: not
// terminating, not finished. A pod being deleted still reports usage, but
// the workload is already replacing it.
func activePods(pods []*corev1.Pod) []*corev1.Pod {
	out := pods[:0:0]
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}

// observation builds what the policy sees of one workload: requests and
// limits from the newest pod (it reflects the current template and what the
// admission controller last applied), usage as the mean over pods with
// valid samples, peak as their maximum, OOM kills that finished after since,
// CPU pressure as the mean over the same pods (a pod with usage but no
// pressure series counts 0, not measured, as the whole observation does
// without a pressure source). dropped counts invalid values by reason. A pod with any invalid value is
// treated as a pod without metrics: keeping its other containers would
// understate the pod's usage in the replica arithmetic, and the HPA rules
// for pods without metrics are the conservative, defined path.
func observation(now time.Time, window time.Duration, since time.Time, pods []*corev1.Pod, use map[string]*usage.PodUsage,
	pressure map[usage.ContainerKey]float64, dropped map[string]int) workload.Observation {
	obs := workload.Observation{Time: now, Window: window, Replicas: int32(len(pods))}
	newest := pods[0]
	for _, p := range pods[1:] {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	obs.Containers = make([]workload.ContainerObservation, 0, len(newest.Spec.Containers))
	for i := range newest.Spec.Containers {
		c := &newest.Spec.Containers[i]
		r := containerResources(newest, c)
		obs.Containers = append(obs.Containers, workload.ContainerObservation{
			Name:     c.Name,
			Requests: mpa.Resources(r.Requests),
			Limits:   mpa.Resources(r.Limits),
		})
	}
	counts := make([]int, len(obs.Containers))
	obs.Pods = make([]workload.PodSample, 0, len(pods))
	for _, p := range pods {
		s := workload.PodSample{Name: p.Name}
		if p.Status.StartTime != nil {
			s.Started = p.Status.StartTime.Time
		}
		for _, cond := range p.Status.Conditions {
			switch {
			case cond.Type == corev1.PodReady:
				s.Ready = cond.Status == corev1.ConditionTrue
				s.ReadySince = cond.LastTransitionTime.Time
			case deferredResize(cond):
				s.ResizeDeferredSince = cond.LastTransitionTime.Time
			}
		}
		if s.Ready {
			obs.ReadyReplicas++
		}
		for i := range p.Spec.Containers {
			s.Requests = s.Requests.Add(mpa.Resources(containerResources(p, &p.Spec.Containers[i]).Requests))
		}
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.LastTerminationState.Terminated
			if t == nil || t.Reason != "OOMKilled" || !t.FinishedAt.After(since) {
				continue
			}
			if i := slices.IndexFunc(obs.Containers, func(c workload.ContainerObservation) bool { return c.Name == cs.Name }); i >= 0 {
				obs.Containers[i].OOMKills++
			}
		}
		if pu := use[p.Name]; pu != nil && validSample(pu, dropped) {
			for _, cu := range pu.Containers {
				i := slices.IndexFunc(obs.Containers, func(c workload.ContainerObservation) bool { return c.Name == cu.Name })
				if i < 0 {
					continue // a container the current template no longer has
				}
				v := workload.Resources{CPU: cu.CPU, Memory: cu.Memory}
				co := &obs.Containers[i]
				co.Usage = co.Usage.Add(v)
				co.Peak = workload.Resources{CPU: max(co.Peak.CPU, v.CPU), Memory: max(co.Peak.Memory, v.Memory)}
				co.CPUPressure += podPressure(pressure, usage.ContainerKey{Namespace: p.Namespace, Pod: p.Name, Container: cu.Name}, dropped)
				counts[i]++
				s.Usage = s.Usage.Add(v)
				s.HasMetrics = true
			}
		}
		if s.HasMetrics {
			obs.Samples++
		}
		obs.Pods = append(obs.Pods, s)
	}
	for i := range obs.Containers {
		if counts[i] > 0 {
			obs.Containers[i].Usage = obs.Containers[i].Usage.Scale(1 / float64(counts[i]))
			// A mean of values in [0, 1]; min only absorbs rounding.
			obs.Containers[i].CPUPressure = min(obs.Containers[i].CPUPressure/float64(counts[i]), 1)
		}
	}
	obs.StartupDelay, _ = workload.MedianStartupDelay(obs.Pods)
	return obs
}

// containerResources is what container c of p runs with: the requests and
// limits the kubelet reports enacted (status.containerStatuses[].resources),
// else the spec's. While an in-place resize is pending, deferred, infeasible
// or in progress, the spec already holds the new values but the container
// still has the old ones, and a utilisation computed from the spec would be
// wrong (kubernetes/kubernetes#142155, open for the HPA). A kubelet without
// in-place resize, or a pod not started yet, reports none: then the spec is
// what the container gets.
func containerResources(p *corev1.Pod, c *corev1.Container) corev1.ResourceRequirements {
	for i := range p.Status.ContainerStatuses {
		if cs := &p.Status.ContainerStatuses[i]; cs.Name == c.Name && cs.Resources != nil {
			return *cs.Resources
		}
	}
	return c.Resources
}

// anyOOMKill reports an OOM kill of any container in obs's window.
func anyOOMKill(obs *workload.Observation) bool {
	for _, co := range obs.Containers {
		if co.OOMKills > 0 {
			return true
		}
	}
	return false
}

// validSample reports whether every value of pu is usable, counting the
// ones that are not.
func validSample(pu *usage.PodUsage, dropped map[string]int) bool {
	ok := true
	for _, cu := range pu.Containers {
		for _, x := range []float64{cu.CPU, cu.Memory} {
			if r := sampleProblem(x); r != "" {
				dropped[r]++
				ok = false
			}
		}
	}
	return ok
}

// podPressure is k's CPU pressure, 0 when it was not measured. The source
// keeps values in [0, 1]; one that is not a number in that range is
// dropped (counted) or brought down to 1 rather than trusted, so that the
// observation stays valid whatever the source.
func podPressure(pressure map[usage.ContainerKey]float64, k usage.ContainerKey, dropped map[string]int) float64 {
	x, ok := pressure[k]
	if !ok {
		return 0
	}
	if r := sampleProblem(x); r != "" {
		dropped[r]++
		return 0
	}
	return min(x, 1)
}
