package whatif

import (
	"context"
	"fmt"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// installed replays a policy installed on a running workload
// (ReplayOptions.InstallAfter): for its first after looks the pods are
// what ran (the recorded replicas and requests) and the policy neither
// sees them nor decides; from the next look on it decides, starting from
// what ran then, with no memory of the looks before, as an autoscaler
// created at that time. Invariant: rec is asked at every look, so that
// its index keeps in step with the windows.
type installed struct {
	rec   *recorded
	inner workload.Policy
	after int
	looks int
}

var (
	_ workload.Policy        = (*installed)(nil)
	_ workload.LatencyReader = (*installed)(nil)
)

func (p *installed) Name() string { return p.inner.Name() }

// ReadsLatency is the wrapped policy's, so the replay computes no more
// percentiles than it reads.
func (p *installed) ReadsLatency() workload.Percentiles { return workload.ReadsLatency(p.inner) }

func (p *installed) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	rec, err := p.rec.Recommend(ctx, obs)
	if p.looks++; p.looks <= p.after {
		return rec, err
	}
	return p.inner.Recommend(ctx, obs)
}

// installAfter wraps c so that its policy takes over from what ran at the
// first look past after (ReplayOptions.InstallAfter); history gives the
// replayed workload's series.
func installAfter(c eval.Contender, after time.Duration, history func(app string) *Series) eval.Contender {
	return eval.Contender{Name: c.Name, New: func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
		inner, err := c.New(r, cfg)
		if err != nil {
			return nil, err
		}
		s := history(r.App.Name)
		if s == nil {
			return nil, fmt.Errorf("no history for %q", r.App.Name)
		}
		if !(s.Step > 0) {
			return nil, fmt.Errorf("%w %q: step %s", ErrSeries, s.Name, s.Step)
		}
		rec, err := newRecorded(s)
		if err != nil {
			return nil, err
		}
		// The looks come at the ends of the steps: the first past after
		// is the policy's.
		return &installed{rec: rec, inner: inner, after: int(after / s.Step)}, nil
	}}
}
