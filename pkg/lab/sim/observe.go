package sim

import (
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// observed is what the simulator reports: the reusable Observation a
// policy sees (its slices point into containers and samples) and the
// windows' metrics.
type observed struct {
	// rate holds the last windows the observation pools (Config.RateWindow);
	// nil when each observation covers its own window.
	rate *rateRing

	obs        workload.Observation
	containers [1]workload.ContainerObservation
	samples    []workload.PodSample
	last       StepMetrics
	history    []StepMetrics
}

// observe fills the reusable Observation from the window just simulated.
func (s *Simulator) observe(end float64, m *StepMetrics) {
	o := &s.out.obs
	o.Time = s.cfg.Start.Add(time.Duration(end * float64(time.Second)))
	o.Replicas = s.spec.desired
	o.RequestRate = m.Arrivals / s.dt
	o.ErrorRate = (m.Failed + m.TimedOut) / s.dt
	// The percentiles the policy does not read are 0 with or without a
	// rate window, so that a policy reading one it did not declare decides
	// on a 0 in every replay, which the what-if's tests see.
	read := workload.AllPercentiles &^ s.cfg.Unread
	o.Latency = read.Keep(m.Latency)
	if s.out.rate != nil {
		s.out.rate.add(s.lat.groups[:s.lat.ngroups], s.lat.effective, s.lat.levels, m)
		o.RequestRate, o.ErrorRate, o.Latency = s.out.rate.pooled(s.dt, s.timeout, read)
	}
	c := &s.out.containers[0]
	c.Requests, c.Limits, c.OOMKills = s.spec.tmplReq, s.spec.tmplLim, m.OOMKills
	c.Usage, c.Peak, c.CPUPressure = workload.Resources{}, workload.Resources{}, 0
	s.out.samples = s.out.samples[:0]
	var ready int32
	var withMetrics int
	for i := range s.cluster.pods {
		p := &s.cluster.pods[i]
		has := p.phase != podPending
		if p.phase == podRunning {
			ready++
		}
		var started time.Time
		if has {
			withMetrics++
			started = s.cfg.Start.Add(time.Duration(p.started * float64(time.Second)))
			c.Usage = c.Usage.Add(p.usage)
			c.CPUPressure += p.pressure
			c.Peak.CPU = max(c.Peak.CPU, p.peak.CPU)
			c.Peak.Memory = max(c.Peak.Memory, p.peak.Memory)
		}
		var deferredSince time.Time
		if p.deferral.waiting {
			deferredSince = s.cfg.Start.Add(time.Duration(p.deferral.since * float64(time.Second)))
		}
		s.out.samples = append(s.out.samples, workload.PodSample{
			Name: p.name, Ready: p.phase == podRunning, HasMetrics: has, Started: started,
			ReadySince: s.cfg.Start.Add(time.Duration(p.transition * float64(time.Second))),
			Usage:      p.usage, Requests: p.req, ResizeDeferredSince: deferredSince,
		})
	}
	if withMetrics > 0 {
		c.Usage = c.Usage.Scale(1 / float64(withMetrics))
		c.CPUPressure /= float64(withMetrics)
	}
	m.Ready = ready
	o.ReadyReplicas = ready
	o.Samples = withMetrics
	o.Pods = s.out.samples
}
