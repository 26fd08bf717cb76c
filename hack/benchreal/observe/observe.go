// Package observe turns successive looks at a Deployment, its pods and
// their usage into the real-node benchmark's samples (hack/benchreal): the
// requests the pods run with, their usage, and the events between two
// looks, told apart as a user would: an in-place resize is a change of the
// resources a container runs with in the same pod; an eviction is a pod
// that went away while the desired count did not drop by as much; an OOM
// kill is a restart whose last termination says OOMKilled. It reads only
// objects it is given, so it is unit-tested without a cluster.
package observe

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Sample is one look at the app.
type Sample struct {
	// T is the look's time in seconds from the load's start.
	T float64
	// Replicas is the Deployment's desired count; Ready the pods Ready.
	Replicas, Ready int
	// CPURequested (cores) and MemoryRequested (bytes) sum the requests of
	// the pods placed on a node and not terminating, as their containers
	// run with them; ReadyCPURequested those of the Ready pods.
	CPURequested, MemoryRequested, ReadyCPURequested float64
	// CPUUsed (cores) and MemoryUsed (bytes) sum the usage given.
	CPUUsed, MemoryUsed float64
	// UsageMissing: no usage was given for this look.
	UsageMissing bool
	// Events since the previous look.
	OOMKills, ReplicaChanges, Resizes, Evictions int
}

// Usage is one container's usage as metrics.k8s.io reports it.
type Usage struct {
	CPU    float64 // cores
	Memory float64 // bytes
}

// Observer remembers what the previous looks saw.
type Observer struct {
	start     time.Time
	prevSpec  int
	resources map[types.UID]string
	restarts  map[string]int32
	gone      map[types.UID]bool
	startup   map[types.UID]float64
}

// New returns an Observer of a run whose load started at start.
func New(start time.Time) *Observer {
	return &Observer{start: start, prevSpec: -1, resources: map[types.UID]string{},
		restarts: map[string]int32{}, gone: map[types.UID]bool{}, startup: map[types.UID]float64{}}
}

// Look records a look at now: d and its pods, and the usage of each
// container (nil when metrics.k8s.io had none).
func (o *Observer) Look(now time.Time, d *appsv1.Deployment, pods []corev1.Pod, usage []Usage) Sample {
	s := Sample{T: now.Sub(o.start).Seconds()}
	spec := 1
	if d.Spec.Replicas != nil {
		spec = int(*d.Spec.Replicas)
	}
	s.Replicas = spec
	drop := 0
	if o.prevSpec >= 0 {
		if spec != o.prevSpec {
			s.ReplicaChanges = 1
		}
		drop = max(0, o.prevSpec-spec)
	}
	o.prevSpec = spec
	present := map[types.UID]bool{}
	gone := 0
	for i := range pods {
		p := &pods[i]
		present[p.UID] = true
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if !o.gone[p.UID] {
				o.gone[p.UID] = true
				gone++
			}
			continue
		}
		if p.Spec.NodeName == "" {
			continue
		}
		cpu, mem, key := Requests(p)
		s.CPURequested += cpu
		s.MemoryRequested += mem
		if ready(p) {
			s.Ready++
			s.ReadyCPURequested += cpu
			o.recordStartup(p)
		}
		if prev, ok := o.resources[p.UID]; ok && prev != key {
			s.Resizes++
		}
		o.resources[p.UID] = key
		for _, cs := range p.Status.ContainerStatuses {
			k := string(p.UID) + "/" + cs.Name
			prev := o.restarts[k] // 0 for a container not seen before
			oom := cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.Reason == "OOMKilled"
			if cs.RestartCount > prev && oom {
				s.OOMKills += int(cs.RestartCount - prev)
			}
			o.restarts[k] = cs.RestartCount
		}
	}
	// Pods gone between two looks without being seen terminating.
	for uid := range o.resources {
		if !present[uid] && !o.gone[uid] {
			o.gone[uid] = true
			gone++
		}
	}
	s.Evictions = max(0, gone-drop)
	if usage == nil {
		s.UsageMissing = true
	}
	for _, u := range usage {
		s.CPUUsed += u.CPU
		s.MemoryUsed += u.Memory
	}
	return s
}

func (o *Observer) recordStartup(p *corev1.Pod) {
	if _, ok := o.startup[p.UID]; ok || !p.CreationTimestamp.After(o.start) {
		return
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			o.startup[p.UID] = c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds()
		}
	}
}

// Startups are the creation-to-Ready seconds of the pods created after the
// start that became Ready, in no particular order.
func (o *Observer) Startups() []float64 {
	out := make([]float64, 0, len(o.startup))
	for _, v := range o.startup {
		out = append(out, v)
	}
	return out
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Requests are what the pod's containers run with (their status's
// resources, else the spec's, as the kubelet reports an in-place resize
// only once applied), and a key that changes with them.
func Requests(p *corev1.Pod) (cpu, mem float64, key string) {
	running := map[string]corev1.ResourceList{}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Resources != nil && cs.Resources.Requests != nil {
			running[cs.Name] = cs.Resources.Requests
		}
	}
	for _, c := range p.Spec.Containers {
		req := c.Resources.Requests
		if r, ok := running[c.Name]; ok {
			req = r
		}
		q := req[corev1.ResourceCPU]
		m := req[corev1.ResourceMemory]
		cpu += float64(q.MilliValue()) / 1000
		mem += float64(m.Value())
		key += c.Name + "=" + quantity(q) + "/" + quantity(m) + ";"
	}
	return cpu, mem, key
}

func quantity(q resource.Quantity) string { return q.String() }
