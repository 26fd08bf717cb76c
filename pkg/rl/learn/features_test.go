package learn

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
)

func TestRateHistory(t *testing.T) {
	var h RateHistory
	if got := h.Rates(); len(got) != 0 {
		t.Fatalf("empty history holds %v", got)
	}
	var want []float64
	for i := range 2*RateHistoryLen + 3 {
		r := float64(i)
		switch i {
		case 5:
			r = math.NaN()
		case 6:
			r = -1
		case 7:
			r = math.Inf(1)
		}
		h.Push(r)
		if !(r >= 0) || math.IsInf(r, 0) {
			r = 0
		}
		want = append(want, r)
		if len(want) > RateHistoryLen {
			want = want[1:]
		}
		if got := h.Rates(); !slices.Equal(got, want) {
			t.Fatalf("after %d pushes: %v, want %v", i+1, got, want)
		}
		if r := RestoreRateHistory(h.Rates()); !slices.Equal(r.Rates(), want) {
			t.Fatalf("restored %v, want %v", r.Rates(), want)
		}
	}
}

func TestRateFeatures(t *testing.T) {
	flat := func(v float64, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	tests := []struct {
		name                string
		rate                float64
		rates               []float64
		off                 Features
		trend1, trend4, t20 float64
		peak                float64
	}{
		{name: "first window", rate: 50},
		{name: "steady", rate: 100, rates: flat(100, 30)},
		{name: "doubling now", rate: 200, rates: flat(100, 20), trend1: 1, trend4: 1, t20: 1, peak: math.Log(200/(2200.0/21)) / math.Log(4)},
		{name: "a ramp", rate: 120, rates: []float64{100, 105, 110, 115}, trend1: 5.0 / 115, trend4: (120 - 107.5) / 107.5, t20: (120 - 107.5) / 107.5, peak: math.Log(120/110.0) / math.Log(4)},
		{name: "after a spike", rate: 100, rates: append(flat(100, 19), 400), trend1: -0.75, trend4: (100 - 175) / 175.0, t20: (100 - 115) / 115.0, peak: math.Log(400/(2400.0/21)) / math.Log(4)},
		{name: "idle noise is no trend", rate: 0.5, rates: flat(0.25, 20), trend1: 0.25, trend4: 0.25, t20: 0.25, peak: math.Log(0.5/(5.5/21)) / math.Log(4)},
		{name: "ablated", rate: 200, rates: flat(100, 20), off: AllFeatures, trend1: 1},
		{name: "only the oldest beyond the history are dropped", rate: 100, rates: append([]float64{1e9}, flat(100, 20)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obs()
			o.RequestRate = tt.rate
			s := Encode(Input{Observation: o, Constraints: cons(), Rates: tt.rates, Off: tt.off})
			for _, c := range []struct {
				name      string
				got, want float64
			}{{"trend", s[FeatRateTrend], tt.trend1}, {"trend4", s[FeatRateTrend4], tt.trend4}, {"trend20", s[FeatRateTrend20], tt.t20}, {"peak", s[FeatRatePeakToMean], tt.peak}} {
				if !near(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
				}
			}
		})
	}
}

func TestParseFeatures(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Features
		ok   bool
	}{
		{"all", AllFeatures, true}, {"", AllFeatures, true}, {"none", 0, true},
		{"trend", FeaturesTrend, true}, {"peak", FeaturesPeak, true}, {"trend, peak", AllFeatures, true},
		{"time", 0, false}, {"trend,", 0, false},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFeatures(tt.in)
			if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
				t.Fatalf("ParseFeatures(%q) = %v, %v", tt.in, got, err)
			}
			if tt.ok {
				back, err := ParseFeatures(got.String())
				if err != nil || back != got {
					t.Fatalf("round trip of %v: %v, %v", got, back, err)
				}
			}
		})
	}
}

// An agent state written before the rate history existed resumes with the
// previous window's rate as its history.
func TestRestoreAgentOldRateState(t *testing.T) {
	now := time.Unix(1000, 0)
	a, err := NewAgent("ns/w", lifecycle.DefaultGates(), DefaultSteps(), now)
	if err != nil {
		t.Fatal(err)
	}
	st := a.State()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "rates")
	m["prevRate"], m["hasPrev"] = 42.0, true
	b, _ = json.Marshal(m)
	var old AgentState
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	r, err := RestoreAgent(old, DefaultSteps())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.State().Rates; !slices.Equal(got, []float64{42}) {
		t.Fatalf("rates %v, want [42]", got)
	}
	if got := r.State(); got.HasPrev || got.PrevRate != 0 {
		t.Fatalf("the old fields are written again: %+v", got)
	}
}
