package reward

import (
	"math"
	"strings"
	"testing"
)

func ptr(f float64) *float64 { return &f }

func TestCompute(t *testing.T) {
	// Half of CPU and a quarter of memory used: RU = (0.5+0.25)/2.
	base := Inputs{CPUUsed: 1, CPUAllocated: 2, MemoryUsed: 1, MemoryAllocated: 4, P95: 0.1, SLO: 0.2, Requests: 100}
	for _, tc := range []struct {
		name   string
		mutate func(*Inputs)
		opts   Options
		want   Terms
	}{
		{"meets the SLO", func(*Inputs) {}, Options{}, Terms{RU: 0.375, SP: 1, Reward: 0.6875}},
		{"twice the SLO", func(in *Inputs) { in.P95 = 0.4 }, Options{}, Terms{RU: 0.375, SP: 0.5, Reward: 0.4375}},
		{"alpha 1 ignores latency", func(in *Inputs) { in.P95 = 4 }, Options{Alpha: ptr(1)}, Terms{RU: 0.375, SP: 0.05, Reward: 0.375}},
		{"alpha 0 ignores utilisation", func(*Inputs) {}, Options{Alpha: ptr(0)}, Terms{RU: 0.375, SP: 1, Reward: 1}},
		{"usage above the request is capped", func(in *Inputs) { in.CPUUsed = 3 }, Options{}, Terms{RU: 0.625, SP: 1, Reward: 0.8125}},
		{"no traffic: SP is 1", func(in *Inputs) { in.Requests, in.P95 = 0, 0 }, Options{}, Terms{RU: 0.375, SP: 1, Reward: 0.6875}},
		{"zero latency with traffic: SP is 1", func(in *Inputs) { in.P95 = 0 }, Options{}, Terms{RU: 0.375, SP: 1, Reward: 0.6875}},
		{"no SLO: SP is 1", func(in *Inputs) { in.SLO, in.P95 = 0, 9 }, Options{}, Terms{RU: 0.375, SP: 1, Reward: 0.6875}},
		{"nothing allocated: RU is 0", func(in *Inputs) { *in = Inputs{P95: 0.1, SLO: 0.2, Requests: 1} }, Options{}, Terms{RU: 0, SP: 1, Reward: 0.5}},
		{"lost requests push SP below 0", func(in *Inputs) { in.P95, in.Lost = 0.4, 80 }, Options{}, Terms{RU: 0.375, SP: -0.3, Reward: 0.0375}},
		{"OOM kill is a negative reward", func(in *Inputs) { in.OOMKills = 1 }, Options{}, Terms{RU: 0.375, SP: 1, Reward: -1}},
		{"OOM penalty is configurable", func(in *Inputs) { in.OOMKills = 2 }, Options{OOMPenalty: 3}, Terms{RU: 0.375, SP: 1, Reward: -3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.mutate(&in)
			got, err := Compute(in, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				n         string
				got, want float64
			}{{"RU", got.RU, tc.want.RU}, {"SP", got.SP, tc.want.SP}, {"reward", got.Reward, tc.want.Reward}} {
				if math.Abs(c.got-c.want) > 1e-12 {
					t.Errorf("%s = %g, want %g", c.n, c.got, c.want)
				}
			}
		})
	}
}

func TestComputeRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Inputs
		opts    Options
		wantErr string
	}{
		{"NaN latency", Inputs{P95: math.NaN()}, Options{}, "finite"},
		{"negative usage", Inputs{CPUUsed: -1}, Options{}, "finite"},
		{"alpha above 1", Inputs{}, Options{Alpha: ptr(1.5)}, "alpha"},
		{"negative OOM kills", Inputs{OOMKills: -1}, Options{}, "OOM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Compute(tc.in, tc.opts); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
