package whatif

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// TestPoliciesReadOnlyWhatTheyDeclare guards the simulator's Unread
// percentiles (sim.Config.Unread), which eval and Check set from each
// policy's workload.ReadsLatency: every policy the what-if replays is run
// twice on the same seed, once given all three percentiles and once given
// only those it declares (the others 0 and never computed), and every
// decision must be the same. A policy that reads a percentile it does not
// declare decides on a 0 there, and differs as soon as that percentile
// matters; the tight SLO makes the p95 matter (windows on both sides of
// it), and the last case checks that a lying policy is caught.
func TestPoliciesReadOnlyWhatTheyDeclare(t *testing.T) {
	const steps = 720
	app := truthApp("ns/reads")
	byApp := map[string]*Series{app.Name: record(t, app, steps, 1)}
	tr, err := sim.GenerateTrace(sim.Diurnal, sim.TraceOptions{Mean: app.BaseRate, Steps: steps, Step: step, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	configs := []struct {
		name string
		cfg  sim.Config
	}{
		{"each window", sim.Config{Step: step}},
		{"rate window, sampled", sim.Config{Step: step, Resize: sim.ResizeInPlace, RateWindow: 2 * time.Minute, SampledLatency: true}},
	}
	for _, name := range append(Policies(), VariantPrefix+"target=0.9") {
		c, err := contender(name, func(app string) *Series { return byApp[app] })
		if err != nil {
			t.Fatal(err)
		}
		for _, cc := range configs {
			for _, slo := range []float64{app.SLO, 0.12} {
				t.Run(fmt.Sprintf("%s/%s/slo %g", name, cc.name, slo), func(t *testing.T) {
					a := app
					a.SLO = slo
					read, over, err := replayBoth(c, eval.Run{App: a, Trace: &tr, Seed: 3}, cc.cfg)
					if err != nil {
						t.Fatal(err)
					}
					if read.Has(workload.PercentileP95) && slo < app.SLO && !(over > 0 && over < steps) {
						t.Errorf("%d of %d windows over the SLO: the p95 it reads never mattered", over, steps)
					}
					t.Logf("reads %03b; %d of %d windows over the SLO", read, over, steps)
				})
			}
		}
	}
	// The guard's own test: a policy that reads a percentile it does not
	// declare is caught, whether it reads one nobody does or drops one
	// that its decisions depend on.
	tight := app
	tight.SLO = 0.12
	for _, tc := range []struct {
		name string
		new  func(workload.Constraints) (workload.Policy, error)
	}{
		{"hpa reading the p50 it does not declare", func(c workload.Constraints) (workload.Policy, error) {
			p, err := hpa.NewPolicyFactory(hpa.PolicyOptions{})(c)
			return liar{p}, err
		}},
		{"fused not declaring the p95 it reads", func(c workload.Constraints) (workload.Policy, error) {
			p, err := fusion.NewPolicyFactory(fusion.Options{})(c)
			return declaring{p, workload.NoPercentiles}, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cc := range configs {
				if _, _, err := replayBoth(eval.FromFactory(tc.name, tc.new), eval.Run{App: tight, Trace: &tr, Seed: 3}, cc.cfg); err == nil {
					t.Errorf("%s: the replays agree", cc.name)
				}
			}
		})
	}
}

// liar declares that it reads the p95 alone, and reads the p50 too: one
// replica more while the median is above 50 ms.
type liar struct{ workload.Policy }

func (liar) ReadsLatency() workload.Percentiles { return workload.PercentileP95 }

func (l liar) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	rec, err := l.Policy.Recommend(ctx, obs)
	if obs.Latency.P50 > 0.05 {
		rec.Replicas++
	}
	return rec, err
}

// declaring is a policy with another declaration than its own.
type declaring struct {
	workload.Policy
	read workload.Percentiles
}

func (d declaring) ReadsLatency() workload.Percentiles { return d.read }

// replayBoth replays c's policy on run twice, given every percentile and
// given what it declares it reads, and returns that declaration and how
// many windows' observed p95 was above the SLO, or where the two first
// differ.
func replayBoth(c eval.Contender, run eval.Run, cfg sim.Config) (read workload.Percentiles, over int, err error) {
	ctx := context.Background()
	full, part := cfg, cfg
	full.Unread = workload.NoPercentiles
	var pols [2]workload.Policy
	for k := range pols {
		if pols[k], err = c.New(run, cfg); err != nil {
			return 0, 0, err
		}
	}
	read = workload.ReadsLatency(pols[1])
	part.Unread = workload.AllPercentiles &^ read
	var sims [2]*sim.Simulator
	for k, cfg := range []sim.Config{full, part} {
		if sims[k], err = sim.New(cfg, run.App, run.Trace, run.Seed); err != nil {
			return 0, 0, err
		}
	}
	for i := range run.Trace.Rates {
		if m0, m1 := sims[0].Step(), sims[1].Step(); m0 != m1 {
			return read, over, fmt.Errorf("window %d: the windows differ: %+v, %+v", i, m0, m1)
		}
		o0, o1 := sims[0].Observation(), sims[1].Observation()
		if want := read.Keep(o0.Latency); o1.Latency != want {
			return read, over, fmt.Errorf("window %d: latency %+v given %03b, want %+v", i, o1.Latency, read, want)
		}
		if o0.SLO > 0 && o0.Latency.P95 > o0.SLO {
			over++
		}
		r0, err0 := pols[0].Recommend(ctx, o0)
		r1, err1 := pols[1].Recommend(ctx, o1)
		if !reflect.DeepEqual(r0, r1) || fmt.Sprint(err0) != fmt.Sprint(err1) {
			return read, over, fmt.Errorf("window %d: given %03b of the percentiles the policy decided %+v (%v), given all %+v (%v)", i, read, r1, err1, r0, err0)
		}
		if err0 != nil {
			continue
		}
		a0, err0 := sims[0].Apply(r0)
		a1, err1 := sims[1].Apply(r1)
		if a0 != a1 || fmt.Sprint(err0) != fmt.Sprint(err1) {
			return read, over, fmt.Errorf("window %d: applied %+v (%v) and %+v (%v)", i, a1, err1, a0, err0)
		}
	}
	return read, over, nil
}
