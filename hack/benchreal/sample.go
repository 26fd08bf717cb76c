//go:build benchreal

package main

import (
	"context"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/hack/benchreal/result"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sample is one look at the app, every third of a window.
type sample struct {
	t                       float64 // seconds from the load's start
	replicas, ready         int
	cpuReq, memReq          float64
	readyCPUReq             float64
	cpuUsed, memUsed        float64
	oom, scale, resize, evi int
}

// sampler follows the app's Deployment, pods and usage; its counters tell
// in-place resizes (the resources a container runs with change, same pod)
// from evictions (a pod deleted while the desired count did not drop).
type sampler struct {
	tb        *framework.Testbed
	ns, name  string
	start     time.Time
	window    time.Duration
	samples   []sample
	prevSpec  int
	resources map[types.UID]string
	restarts  map[string]int32
	gone      map[types.UID]bool
	// startup has each pod's creation-to-Ready seconds, once Ready.
	startup map[types.UID]float64
}

func newSampler(tb *framework.Testbed, ns, name string, start time.Time, window time.Duration) *sampler {
	return &sampler{tb: tb, ns: ns, name: name, start: start, window: window, prevSpec: -1,
		resources: map[types.UID]string{}, restarts: map[string]int32{}, gone: map[types.UID]bool{},
		startup: map[types.UID]float64{}}
}

func (s *sampler) loop(ctx context.Context) {
	t := time.NewTicker(s.window / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c, cancel := context.WithTimeout(ctx, s.window/3)
			if smp, err := s.take(c); err != nil {
				logf("sample of %s: %v", s.ns, err)
			} else {
				s.samples = append(s.samples, smp)
			}
			cancel()
		}
	}
}

func (s *sampler) take(ctx context.Context) (sample, error) {
	smp := sample{t: time.Since(s.start).Seconds()}
	d, err := s.tb.Client.AppsV1().Deployments(s.ns).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return smp, err
	}
	pods, err := s.tb.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return smp, err
	}
	spec := 1
	if d.Spec.Replicas != nil {
		spec = int(*d.Spec.Replicas)
	}
	smp.replicas = spec
	drop := 0
	if s.prevSpec >= 0 {
		if spec != s.prevSpec {
			smp.scale = 1
		}
		drop = max(0, s.prevSpec-spec)
	}
	s.prevSpec = spec
	present := map[types.UID]bool{}
	gone := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		present[p.UID] = true
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if !s.gone[p.UID] {
				s.gone[p.UID] = true
				gone++
			}
			continue
		}
		if p.Spec.NodeName == "" {
			continue
		}
		cpu, mem, key := podRequests(p)
		smp.cpuReq += cpu
		smp.memReq += mem
		if framework.PodReady(p) {
			smp.ready++
			smp.readyCPUReq += cpu
			if _, ok := s.startup[p.UID]; !ok && p.CreationTimestamp.Time.After(s.start) {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady {
						s.startup[p.UID] = c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds()
					}
				}
			}
		}
		if prev, ok := s.resources[p.UID]; ok && prev != key {
			smp.resize++
		}
		s.resources[p.UID] = key
		for _, cs := range p.Status.ContainerStatuses {
			k := string(p.UID) + "/" + cs.Name
			if prev, ok := s.restarts[k]; ok && cs.RestartCount > prev &&
				cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.Reason == "OOMKilled" {
				smp.oom += int(cs.RestartCount - prev)
			} else if !ok && cs.RestartCount > 0 && cs.LastTerminationState.Terminated != nil &&
				cs.LastTerminationState.Terminated.Reason == "OOMKilled" {
				smp.oom += int(cs.RestartCount)
			}
			s.restarts[k] = cs.RestartCount
		}
	}
	// Pods gone without passing through deletion as far as we saw.
	for uid := range s.resources {
		if !present[uid] && !s.gone[uid] {
			s.gone[uid] = true
			gone++
		}
	}
	smp.evi = max(0, gone-drop)
	pm, err := s.tb.Metrics.MetricsV1beta1().PodMetricses(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		// No usage yet (metrics-server needs a scrape or two of a new
		// pod): the window's usage is what the other samples saw.
		logf("usage of %s: %v", s.ns, err)
		return smp, nil
	}
	for _, m := range pm.Items {
		for _, c := range m.Containers {
			smp.cpuUsed += float64(c.Usage.Cpu().MilliValue()) / 1000
			smp.memUsed += float64(c.Usage.Memory().Value())
		}
	}
	return smp, nil
}

// podRequests are what the pod's containers run with (their status's
// resources, else the spec's), and a key that changes with them.
func podRequests(p *corev1.Pod) (cpu, mem float64, key string) {
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

// windows joins the load generator's records with the samples, by time.
func (s *sampler) windows(recs []loadgen.Record) []result.Window {
	out := make([]result.Window, 0, len(recs))
	var last sample
	j := 0
	for _, r := range recs {
		w := result.Window{Index: r.Window, Start: r.Start, End: r.End, Expected: r.Expected, Sent: r.Sent, OK: r.OK, Lost: r.Lost}
		if r.P95 != nil {
			w.P95 = *r.P95
		}
		n := 0
		for ; j < len(s.samples) && s.samples[j].t <= r.End; j++ {
			smp := s.samples[j]
			if smp.t < r.Start {
				continue
			}
			n++
			w.CPURequested += smp.cpuReq
			w.MemoryRequested += smp.memReq
			w.CPUUsed += smp.cpuUsed
			w.MemoryUsed += smp.memUsed
			w.OOMKills += smp.oom
			w.ReplicaChanges += smp.scale
			w.Resizes += smp.resize
			w.Evictions += smp.evi
			last = smp
		}
		if n > 0 {
			w.CPURequested /= float64(n)
			w.MemoryRequested /= float64(n)
			w.CPUUsed /= float64(n)
			w.MemoryUsed /= float64(n)
		} else {
			w.CPURequested, w.MemoryRequested, w.CPUUsed, w.MemoryUsed = last.cpuReq, last.memReq, last.cpuUsed, last.memUsed
		}
		w.Replicas, w.Ready, w.ReadyCPURequested = last.replicas, last.ready, last.readyCPUReq
		out = append(out, w)
	}
	return out
}

// startups are the creation-to-Ready seconds of the pods created during
// the run, in no particular order.
func (s *sampler) startups() []float64 {
	out := make([]float64, 0, len(s.startup))
	for _, v := range s.startup {
		out = append(out, v)
	}
	return out
}
