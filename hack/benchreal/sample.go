//go:build benchreal

package main

import (
	"context"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/hack/benchreal/observe"
	"github.com/aware-k8s/aware/hack/benchreal/result"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sampler looks at the app every third of a window (observe.Observer
// tells resizes, evictions and OOM kills apart).
type sampler struct {
	tb       *framework.Testbed
	ns, name string
	window   time.Duration
	obs      *observe.Observer
	samples  []observe.Sample
	// last is the usage of the last look that had some: metrics.k8s.io
	// has none for a new pod until a scrape or two.
	last []observe.Usage
}

func newSampler(tb *framework.Testbed, ns, name string, start time.Time, window time.Duration) *sampler {
	return &sampler{tb: tb, ns: ns, name: name, window: window, obs: observe.New(start)}
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

func (s *sampler) take(ctx context.Context) (observe.Sample, error) {
	now := time.Now()
	d, err := s.tb.Client.AppsV1().Deployments(s.ns).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return observe.Sample{}, err
	}
	pods, err := s.tb.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return observe.Sample{}, err
	}
	var usage []observe.Usage
	pm, err := s.tb.Metrics.MetricsV1beta1().PodMetricses(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		logf("usage of %s: %v", s.ns, err)
	} else {
		usage = []observe.Usage{}
		for _, m := range pm.Items {
			for _, c := range m.Containers {
				usage = append(usage, observe.Usage{CPU: float64(c.Usage.Cpu().MilliValue()) / 1000, Memory: float64(c.Usage.Memory().Value())})
			}
		}
	}
	smp := s.obs.Look(now, d, pods.Items, usage)
	if smp.UsageMissing && s.last != nil {
		// The window's usage is what the previous look saw.
		for _, u := range s.last {
			smp.CPUUsed += u.CPU
			smp.MemoryUsed += u.Memory
		}
	} else if !smp.UsageMissing {
		s.last = usage
	}
	return smp, nil
}

// startups are the creation-to-Ready seconds of the pods created during
// the run, in no particular order.
func (s *sampler) startups() []float64 { return s.obs.Startups() }

// windows joins the load generator's records with the samples, by time.
func (s *sampler) windows(recs []loadgen.Record) []result.Window {
	out := make([]result.Window, 0, len(recs))
	var last observe.Sample
	j := 0
	for _, r := range recs {
		w := result.Window{Index: r.Window, Start: r.Start, End: r.End, Expected: r.Expected, Sent: r.Sent, OK: r.OK, Lost: r.Lost}
		if r.P95 != nil {
			w.P95 = *r.P95
		}
		n := 0
		for ; j < len(s.samples) && s.samples[j].T <= r.End; j++ {
			smp := s.samples[j]
			if smp.T < r.Start {
				continue
			}
			n++
			w.CPURequested += smp.CPURequested
			w.MemoryRequested += smp.MemoryRequested
			w.CPUUsed += smp.CPUUsed
			w.MemoryUsed += smp.MemoryUsed
			w.OOMKills += smp.OOMKills
			w.ReplicaChanges += smp.ReplicaChanges
			w.Resizes += smp.Resizes
			w.Evictions += smp.Evictions
			last = smp
		}
		if n > 0 {
			w.CPURequested /= float64(n)
			w.MemoryRequested /= float64(n)
			w.CPUUsed /= float64(n)
			w.MemoryUsed /= float64(n)
		} else {
			w.CPURequested, w.MemoryRequested, w.CPUUsed, w.MemoryUsed = last.CPURequested, last.MemoryRequested, last.CPUUsed, last.MemoryUsed
		}
		w.Replicas, w.Ready, w.ReadyCPURequested = last.Replicas, last.Ready, last.ReadyCPURequested
		out = append(out, w)
	}
	return out
}
