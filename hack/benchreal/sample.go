//go:build benchreal

package main

import (
	"context"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/hack/benchreal/agent"
	"github.com/aware-k8s/aware/hack/benchreal/observe"
	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

	start  time.Time
	policy string
	// mpas, if set, reads the run's autoscaler (named name) at every look;
	// sloMetrics asks Prometheus what the recommender asks.
	mpas       versioned.Interface
	sloMetrics bool
	promWindow string
	// autoscalerAfter is bench-real --autoscaler-after: until then the
	// autoscaler may not exist yet.
	autoscalerAfter time.Duration
	looks           []look
}

// look is what one look saw of the autoscaler and the SLO inputs, T
// seconds after the start.
type look struct {
	T     float64
	state agent.State
	slo   slo.Look
}

func newSampler(tb *framework.Testbed, ns, name string, start time.Time, window time.Duration) *sampler {
	return &sampler{tb: tb, ns: ns, name: name, window: window, obs: observe.New(start), start: start}
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
			c, cancel = context.WithTimeout(ctx, s.window/3)
			s.lookAt(c)
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

// lookAt reads the autoscaler's state and the SLO inputs, and switches a
// learner in Shadow On once its stage lets it act (agent.SwitchOn).
func (s *sampler) lookAt(ctx context.Context) {
	if s.mpas == nil && !s.sloMetrics {
		return
	}
	l := look{T: time.Since(s.start).Seconds()}
	if s.mpas != nil {
		m, err := s.mpas.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			// A look cut short by the run's end is no news, nor the
			// absence of an autoscaler not yet created (with a few
			// seconds for the creation to land).
			early := apierrors.IsNotFound(err) && l.T < (s.autoscalerAfter+5*time.Second).Seconds()
			if ctx.Err() == nil && !early {
				logf("autoscaler of %s: %v", s.ns, err)
			}
		} else {
			l.state = agent.StateOf(m)
			if agent.SwitchOn(s.policy, l.state) {
				patch := []byte(`{"spec":{"rl":{"mode":"On"}}}`)
				if _, err := s.mpas.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns).Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					logf("switching %s On: %v", s.ns, err)
				} else {
					logf("%s: the agent reports %s; spec.rl.mode Shadow -> On at %.0f s", s.ns, l.state.Stage, l.T)
				}
			}
		}
	}
	if s.sloMetrics {
		l.slo = sloLook(ctx, s.tb.PrometheusURL, s.ns, s.promWindow)
	}
	s.looks = append(s.looks, l)
}

// startups are the creation-to-Ready seconds of the pods created during
// the run, in no particular order.
func (s *sampler) startups() []float64 { return s.obs.Startups() }

// windows joins the load generator's records with the samples, by time.
func (s *sampler) windows(recs []loadgen.Record) []result.Window {
	out := make([]result.Window, 0, len(recs))
	var last observe.Sample
	var lastLook look
	var seen bool
	j, k := 0, 0
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
		// The window's last look at the autoscaler and the SLO inputs, and
		// the mean of its looks' requests in flight.
		var inFlight, pods float64
		answered := 0
		for ; k < len(s.looks) && s.looks[k].T <= r.End; k++ {
			if s.looks[k].T >= r.Start {
				lastLook, seen = s.looks[k], true
				if s.looks[k].slo.InFlightOK {
					inFlight += s.looks[k].slo.InFlight
					pods += s.looks[k].slo.InFlightPods
					answered++
				}
			}
		}
		if answered > 0 {
			inFlight /= float64(answered)
			w.InFlight, w.InFlightPods = inFlight, pods/float64(answered)
		}
		if seen {
			st := lastLook.state
			w.Stage, w.Source, w.Mode, w.ScalingReason = st.Stage, st.Source, st.Mode, st.ScalingReason
			if lastLook.slo.RateOK {
				w.SLORate = lastLook.slo.Rate
			}
			if lastLook.slo.P95OK {
				w.SLOP95 = lastLook.slo.P95
			}
		}
		seen = false
		out = append(out, w)
	}
	return out
}
