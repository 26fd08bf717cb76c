package workload

import (
	"context"
	"testing"
)

// undeclared reads whatever it likes and says nothing about it.
type undeclared struct{}

func (undeclared) Name() string { return "undeclared" }

func (undeclared) Recommend(context.Context, Observation) (Recommendation, error) {
	return Recommendation{}, nil
}

// declared reads what read says.
type declared struct {
	undeclared
	read Percentiles
}

func (d declared) ReadsLatency() Percentiles { return d.read }

// TestReadsLatency: a policy that does not declare is given every
// percentile; one that does is given what it declares, and Keep zeroes
// the rest.
func TestReadsLatency(t *testing.T) {
	l := Latency{P50: 0.1, P95: 0.2, P99: 0.3}
	for _, tc := range []struct {
		name string
		p    Policy
		want Percentiles
		kept Latency
	}{
		{"undeclared", undeclared{}, AllPercentiles, l},
		{"none", declared{read: NoPercentiles}, NoPercentiles, Latency{}},
		{"p95", declared{read: PercentileP95}, PercentileP95, Latency{P95: 0.2}},
		{"p50 and p99", declared{read: PercentileP50 | PercentileP99}, PercentileP50 | PercentileP99, Latency{P50: 0.1, P99: 0.3}},
		{"beyond the three", declared{read: 0xff}, AllPercentiles, l},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReadsLatency(tc.p)
			if got != tc.want {
				t.Fatalf("ReadsLatency = %03b, want %03b", got, tc.want)
			}
			if k := got.Keep(l); k != tc.kept {
				t.Errorf("Keep = %+v, want %+v", k, tc.kept)
			}
			if u := Unread(tc.p); u != AllPercentiles&^tc.want || u&got != 0 {
				t.Errorf("Unread = %03b, want %03b", u, AllPercentiles&^tc.want)
			}
		})
	}
}
