package workload

import "testing"

func TestCPUBoostBoosted(t *testing.T) {
	var none *CPUBoost
	for _, tc := range []struct {
		b          *CPUBoost
		base, want float64
	}{
		{none, 1, 1},
		{&CPUBoost{Factor: 3}, 0.5, 1.5},
		{&CPUBoost{Value: 2}, 0.5, 2},
		{&CPUBoost{Factor: 2, Value: 0.5}, 1, 2},
		{&CPUBoost{Value: 0.5}, 1, 1}, // never a cut
	} {
		if got := tc.b.Boosted(tc.base); got != tc.want {
			t.Errorf("%+v.Boosted(%g) = %g, want %g", tc.b, tc.base, got, tc.want)
		}
	}
}
