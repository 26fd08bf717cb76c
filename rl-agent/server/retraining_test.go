package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// TestRetrainingLongest: the gauge is the longest stay in Retraining at
// the scrape, whatever the other workloads' stages and ages, and 0 when no
// workload is Retraining.
func TestRetrainingLongest(t *testing.T) {
	now := t0.Add(1000 * time.Hour)
	type workload struct {
		stage lifecycle.Stage
		since time.Duration // before now
	}
	for _, tc := range []struct {
		name      string
		workloads []workload
		want      float64
	}{
		{"no workloads", nil, 0},
		{"none retraining", []workload{{lifecycle.Serving, 50 * time.Hour}, {lifecycle.OnlineTraining, time.Hour}}, 0},
		{"one retraining", []workload{{lifecycle.Retraining, 3 * time.Hour}}, 3 * 3600},
		{"the longest of several", []workload{
			{lifecycle.Retraining, 2 * time.Hour}, {lifecycle.Retraining, 13 * time.Hour},
			{lifecycle.Serving, 40 * time.Hour}, {lifecycle.Retraining, time.Minute},
		}, 13 * 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(o *Options) { o.Now = func() time.Time { return now } })
			h.srv.registry.mu.Lock()
			for i, w := range tc.workloads {
				key := "ns/w" + string(rune('a'+i))
				a, err := learn.RestoreAgent(learn.AgentState{
					Workload:  key,
					Lifecycle: lifecycle.State{Stage: w.stage, Since: now.Add(-w.since)},
					Gates:     lifecycle.DefaultGates(),
				}, h.srv.opts.Steps)
				if err != nil {
					h.srv.registry.mu.Unlock()
					t.Fatal(err)
				}
				h.srv.registry.agents[key] = a
			}
			h.srv.registry.mu.Unlock()
			n, err := testutil.GatherAndCount(h.reg, RetrainingMetricName)
			if err != nil || n != 1 {
				t.Fatalf("%s gathered %d times (%v), want once", RetrainingMetricName, n, err)
			}
			mfs, err := h.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == RetrainingMetricName {
					if got := mf.GetMetric()[0].GetGauge().GetValue(); got != tc.want {
						t.Errorf("%s = %v, want %v", RetrainingMetricName, got, tc.want)
					}
				}
			}
		})
	}
}
