package vpa

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const mib = 1024 * 1024

func newHist(t testing.TB, halfLife time.Duration) *DecayingHistogram {
	t.Helper()
	o := CPUHistogramOptions()
	h, err := NewDecayingHistogram(&o, halfLife)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBucketLayout(t *testing.T) {
	o := CPUHistogramOptions()
	for _, tc := range []struct {
		v    float64
		want int
	}{{0, 0}, {0.005, 0}, {0.01, 1}, {0.021, 2}, {1e9, o.NumBuckets() - 1}} {
		if got := o.FindBucket(tc.v); got != tc.want {
			t.Errorf("FindBucket(%g) = %d, want %d", tc.v, got, tc.want)
		}
	}
	// Every bucket holds its own start.
	for b := 1; b < o.NumBuckets(); b++ {
		if got := o.FindBucket(o.BucketStart(b) * (1 + 1e-9)); got != b {
			t.Fatalf("bucket %d start maps to %d", b, got)
		}
	}
	if w := o.BucketStart(2) - o.BucketStart(1); math.Abs(w-0.0105) > 1e-12 {
		t.Errorf("second bucket width %g, want 0.0105", w)
	}
}

func TestDecayHalvesWeightAfterHalfLife(t *testing.T) {
	for _, hl := range []time.Duration{time.Hour, 24 * time.Hour} {
		t.Run(hl.String(), func(t *testing.T) {
			h := newHist(t, hl)
			if err := h.AddSample(1, 1, t0); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				after time.Duration
				want  float64
			}{{0, 1}, {hl, 0.5}, {2 * hl, 0.25}} {
				if got := h.TotalWeight(t0.Add(tc.after)); math.Abs(got-tc.want) > 1e-12 {
					t.Errorf("weight after %s = %g, want %g", tc.after, got, tc.want)
				}
			}
			// A newer sample outweighs an old one two to one after a half-life.
			if err := h.AddSample(5, 1, t0.Add(hl)); err != nil {
				t.Fatal(err)
			}
			if p := h.Percentile(0.5); p < 5 {
				t.Errorf("median %g: the newer sample should dominate", p)
			}
			if p := h.Percentile(0.3); p > 1.1 {
				t.Errorf("p30 %g: the older sample should still hold a third", p)
			}
		})
	}
}

func TestDecayRenormalises(t *testing.T) {
	h := newHist(t, time.Hour)
	for i := 0; i < 1000; i++ { // 1000 half-lives: 2^1000 would overflow
		if err := h.AddSample(1, 1, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if math.IsInf(h.total, 0) || math.IsNaN(h.total) || h.total > math.Exp2(maxDecayExponent+2) {
		t.Fatalf("total weight %g not renormalised", h.total)
	}
	if got := h.TotalWeight(t0.Add(999 * time.Hour)); math.Abs(got-2) > 1e-9 { // geometric series → 2
		t.Errorf("decayed total %g, want 2", got)
	}
}

func TestPercentiles(t *testing.T) {
	h := newHist(t, 24*time.Hour)
	for i := 1; i <= 100; i++ {
		if err := h.AddSample(float64(i)/100, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	o := CPUHistogramOptions()
	for _, p := range []float64{0.5, 0.9, 0.95} {
		got := h.Percentile(p)
		// Upper estimate within one bucket (5%) of the true value.
		if got < p || got > p*1.06 {
			t.Errorf("p%.0f = %g, want in [%g, %g]", p*100, got, p, p*1.06)
		}
		if b := o.FindBucket(got * (1 + 1e-9)); math.Abs(o.BucketStart(b)-got) > 1e-12 {
			t.Errorf("p%.0f = %g is not a bucket boundary", p*100, got)
		}
	}
	if got := newHist(t, time.Hour).Percentile(0.9); got != 0 {
		t.Errorf("empty histogram percentile %g, want 0", got)
	}
}

func TestWeightedSamples(t *testing.T) {
	h := newHist(t, time.Hour)
	_ = h.AddSample(0.1, 1, t0)
	_ = h.AddSample(1, 9, t0)
	if got := h.Percentile(0.5); got < 1 {
		t.Errorf("weighted median %g: the weight-9 sample should dominate", got)
	}
}

func TestRejectsBadSamples(t *testing.T) {
	h := newHist(t, time.Hour)
	for _, s := range [][2]float64{{math.NaN(), 1}, {1, math.NaN()}, {-1, 1}, {1, -1}, {math.Inf(1), 1}} {
		if err := h.AddSample(s[0], s[1], t0); err == nil {
			t.Errorf("AddSample(%g, %g): want error", s[0], s[1])
		}
	}
	if !h.IsEmpty() {
		t.Error("rejected samples reached the histogram")
	}
}

func newState(t testing.TB, o Options) (*Recommender, *ContainerState) {
	t.Helper()
	r, err := NewRecommender(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, r.State("app")
}

// feed adds a day of per-minute samples with constant cpu and memory.
func feed(t testing.TB, s *ContainerState, from time.Time, n int, cpu, mem float64) {
	t.Helper()
	for i := 0; i < n; i++ {
		at := from.Add(time.Duration(i) * time.Minute)
		if err := s.AddCPUSample(at, cpu, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.AddMemorySample(at, mem); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEstimateMarginsAndConfidence(t *testing.T) {
	r, s := newState(t, Options{})
	feed(t, s, t0, 7*24*60, 1, 1e9) // one week
	e := r.Estimate(s, workload.Resources{})
	cpuBucketEnd := s.CPU().Percentile(0.9)
	if want := cpuBucketEnd * 1.15; math.Abs(e.Target.CPU-want) > 1e-12 {
		t.Errorf("cpu target %g, want p90·1.15 = %g", e.Target.CPU, want)
	}
	// One week of history: upper ×(1+1/7), lower ×(1+0.001/7)^-2.
	if want := s.CPU().Percentile(0.95) * 1.15 * (1 + 1.0/7); math.Abs(e.UpperBound.CPU-want) > 1e-3*want {
		t.Errorf("cpu upper %g, want %g", e.UpperBound.CPU, want)
	}
	if want := s.CPU().Percentile(0.5) * 1.15 * math.Pow(1+0.001/7, -2); math.Abs(e.LowerBound.CPU-want) > 1e-3*want {
		t.Errorf("cpu lower %g, want %g", e.LowerBound.CPU, want)
	}
	if e.Target.Memory < 1e9*1.15 || e.Target.Memory > 1e9*1.15*1.06 {
		t.Errorf("memory target %g, want about 1.15 GB", e.Target.Memory)
	}

	// Short history: the bounds open up.
	r2, s2 := newState(t, Options{})
	feed(t, s2, t0, 60, 1, 1e9) // one hour
	e2 := r2.Estimate(s2, workload.Resources{})
	if !(e2.UpperBound.CPU > 20*e2.Target.CPU) || !(e2.LowerBound.CPU < e.LowerBound.CPU) {
		t.Errorf("one hour of history: bounds [%g, %g] should be wider than a week's [%g, %g]", e2.LowerBound.CPU, e2.UpperBound.CPU, e.LowerBound.CPU, e.UpperBound.CPU)
	}
	if err := (workload.Resources{CPU: e2.UpperBound.CPU, Memory: e2.UpperBound.Memory}).Valid(); err != nil {
		t.Errorf("upper bound not finite: %v", err)
	}
}

func TestMinimums(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		containers int
		wantCPU    float64
		wantMem    float64
	}{
		{"defaults, one container", Options{}, 1, 0.025, 250 * mib},
		{"defaults split over two", Options{}, 2, 0.0125, 125 * mib},
		{"configured", Options{PodMinCPU: 0.1, PodMinMemory: 64 * mib}, 1, 0.1, 64 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, s := newState(t, tc.opts)
			feed(t, s, t0, 100, 0.001, 1e6) // tiny usage
			e := r.Estimate(s, r.PodMinimum(tc.containers))
			if e.Target.CPU != tc.wantCPU || e.Target.Memory != tc.wantMem {
				t.Errorf("target %+v, want cpu %g memory %g", e.Target, tc.wantCPU, tc.wantMem)
			}
		})
	}
}

func TestOOMBump(t *testing.T) {
	for _, tc := range []struct {
		name     string
		used     float64
		wantPeak float64
	}{
		{"ratio wins for large containers", 2000 * mib, 2400 * mib},
		{"minimum bump wins for small ones", 200 * mib, 300 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, s := newState(t, Options{})
			feed(t, s, t0, 10, 0.1, 100*mib)
			if err := s.RecordOOM(t0.Add(10*time.Minute), tc.used); err != nil {
				t.Fatal(err)
			}
			e := r.Estimate(s, workload.Resources{})
			lo, hi := tc.wantPeak*1.15, tc.wantPeak*1.15*1.06
			if e.Target.Memory < lo || e.Target.Memory > hi {
				t.Errorf("memory target %.0f MiB, want in [%.0f, %.0f] MiB", e.Target.Memory/mib, lo/mib, hi/mib)
			}
			// A second OOM at the same size does not compound.
			if err := s.RecordOOM(t0.Add(11*time.Minute), tc.used); err != nil {
				t.Fatal(err)
			}
			if e2 := r.Estimate(s, workload.Resources{}); e2.Target.Memory != e.Target.Memory {
				t.Errorf("repeated OOM raised the target %g → %g", e.Target.Memory, e2.Target.Memory)
			}
		})
	}
}

func TestMemoryPeakPerInterval(t *testing.T) {
	_, s := newState(t, Options{})
	for i, m := range []float64{100, 300, 200} { // same day: one peak of 300
		if err := s.AddMemorySample(t0.Add(time.Duration(i)*time.Hour), m*mib); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Memory().TotalWeight(s.windowEnd); math.Abs(got-1) > 1e-9 {
		t.Errorf("one interval should hold one peak of weight 1, got %g", got)
	}
	if p := s.Memory().Percentile(0.1); p < 300*mib {
		t.Errorf("the only peak should be 300 MiB, p10 = %g MiB", p/mib)
	}
}

func TestCapAndControlledResources(t *testing.T) {
	e := Estimate{
		Target:     workload.Resources{CPU: 2, Memory: 4e9},
		LowerBound: workload.Resources{CPU: 0.01, Memory: 1e9},
		UpperBound: workload.Resources{CPU: 8, Memory: 8e9},
	}
	co := &workload.ContainerObservation{Name: "app", Requests: workload.Resources{CPU: 0.5, Memory: 2e9}, Limits: workload.Resources{CPU: 1, Memory: 3e9}}
	for _, tc := range []struct {
		name       string
		p          workload.ContainerPolicy
		wantTarget workload.Resources
		wantLower  workload.Resources
		wantUpper  workload.Resources
	}{
		{"unbounded", workload.ContainerPolicy{}, e.Target, e.LowerBound, e.UpperBound},
		{"max allowed", workload.ContainerPolicy{MaxAllowed: workload.Resources{CPU: 1, Memory: 3e9}},
			workload.Resources{CPU: 1, Memory: 3e9}, e.LowerBound, workload.Resources{CPU: 1, Memory: 3e9}},
		{"min allowed", workload.ContainerPolicy{MinAllowed: workload.Resources{CPU: 0.1}},
			e.Target, workload.Resources{CPU: 0.1, Memory: 1e9}, e.UpperBound},
		{"cpu only", workload.ContainerPolicy{ControlledResources: []workload.Resource{workload.CPU}},
			workload.Resources{CPU: 2, Memory: 2e9}, workload.Resources{CPU: 0.01, Memory: 2e9}, workload.Resources{CPU: 8, Memory: 2e9}},
		{"requests only stays under the limit", workload.ContainerPolicy{ControlledValues: workload.RequestsOnly},
			workload.Resources{CPU: 1, Memory: 3e9}, e.LowerBound, workload.Resources{CPU: 1, Memory: 3e9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Cap(e, tc.p, co)
			if got.Target != tc.wantTarget || got.LowerBound != tc.wantLower || got.UpperBound != tc.wantUpper {
				t.Errorf("got target %+v lower %+v upper %+v\nwant target %+v lower %+v upper %+v", got.Target, got.LowerBound, got.UpperBound, tc.wantTarget, tc.wantLower, tc.wantUpper)
			}
			if tc.p.Controls(workload.CPU) && got.UncappedTarget.CPU != e.Target.CPU {
				t.Errorf("uncapped target %g, want %g", got.UncappedTarget.CPU, e.Target.CPU)
			}
		})
	}
}

func TestScaleLimit(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		request, newRequest, limit float64
		want                       float64
		wantCapped                 bool
	}{
		{"keeps ratio", 1, 3, 2, 6, false},
		{"scales down", 2, 1, 5, 2.5, false},
		{"no limit", 1, 3, 0, 0, false},
		{"no new request", 1, 0, 2, 0, false},
		{"no old request: limit follows request", 0, 3, 2, 3, false},
		{"equal request and limit", 2, 3, 2, 3, false},
		{"overflow saturates", 1, 1e300, 1e300, MaxMemoryQuantity, true},
		{"huge ratio saturates", 1e-300, 1, 1e10, MaxMemoryQuantity, true},
		{"NaN limit", 1, 1, math.NaN(), 0, false},
		{"NaN request", math.NaN(), 2, 4, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, capped := ScaleLimit(tc.request, tc.newRequest, tc.limit, MaxMemoryQuantity)
			if got != tc.want || capped != tc.wantCapped {
				t.Errorf("ScaleLimit(%g, %g, %g) = %g, %v; want %g, %v", tc.request, tc.newRequest, tc.limit, got, capped, tc.want, tc.wantCapped)
			}
		})
	}
}

func TestControlledValues(t *testing.T) {
	req := workload.Resources{CPU: 0.5, Memory: 1e9}
	lim := workload.Resources{CPU: 1, Memory: 2e9}
	newReq := workload.Resources{CPU: 1, Memory: 3e9}
	for _, tc := range []struct {
		name string
		p    workload.ContainerPolicy
		want workload.Resources
	}{
		{"default scales limits", workload.ContainerPolicy{}, workload.Resources{CPU: 2, Memory: 6e9}},
		{"requests and limits", workload.ContainerPolicy{ControlledValues: workload.RequestsAndLimits}, workload.Resources{CPU: 2, Memory: 6e9}},
		{"requests only keeps limits", workload.ContainerPolicy{ControlledValues: workload.RequestsOnly}, lim},
		{"uncontrolled memory keeps its limit", workload.ContainerPolicy{ControlledResources: []workload.Resource{workload.CPU}}, workload.Resources{CPU: 2, Memory: 2e9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := Limits(tc.p, req, lim, newReq); got != tc.want {
				t.Errorf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	r, s := newState(t, Options{HalfLife: time.Hour})
	feed(t, s, t0, 500, 0.3, 400*mib)
	_ = s.RecordOOM(t0.Add(500*time.Minute), 500*mib)
	cp := s.Checkpoint()
	data, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := NewRecommender(Options{HalfLife: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s2 := r2.State("app")
	if err := s2.Restore(decoded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s2.Checkpoint(), cp) {
		t.Errorf("round trip changed the checkpoint:\n got %+v\nwant %+v", s2.Checkpoint(), cp)
	}
	if a, b := r.Estimate(s, workload.Resources{}), r2.Estimate(s2, workload.Resources{}); a != b {
		t.Errorf("estimates differ after restore: %+v vs %+v", a, b)
	}
	// Both continue identically.
	feed(t, s, t0.Add(600*time.Minute), 10, 0.9, 900*mib)
	feed(t, s2, t0.Add(600*time.Minute), 10, 0.9, 900*mib)
	if a, b := r.Estimate(s, workload.Resources{}), r2.Estimate(s2, workload.Resources{}); a != b {
		t.Errorf("estimates diverge after restore: %+v vs %+v", a, b)
	}
}

func TestRestoreRejectsBadCheckpoints(t *testing.T) {
	_, s := newState(t, Options{})
	feed(t, s, t0, 10, 0.3, 400*mib)
	good := s.Checkpoint()
	for _, tc := range []struct {
		name   string
		mutate func(*ContainerCheckpoint)
	}{
		{"bucket out of range", func(c *ContainerCheckpoint) { c.CPU.Buckets[0].Bucket = 10000 }},
		{"negative bucket", func(c *ContainerCheckpoint) { c.CPU.Buckets[0].Bucket = -1 }},
		{"negative weight", func(c *ContainerCheckpoint) { c.CPU.Buckets[0].Weight = -1 }},
		{"NaN weight", func(c *ContainerCheckpoint) { c.CPU.Buckets[0].Weight = math.NaN() }},
		{"total mismatch", func(c *ContainerCheckpoint) { c.CPU.TotalWeight *= 2 }},
		{"huge total", func(c *ContainerCheckpoint) { c.CPU.TotalWeight = 1e300 }},
		{"layout mismatch", func(c *ContainerCheckpoint) { c.Memory.NumBuckets = 3 }},
		{"duplicate bucket", func(c *ContainerCheckpoint) { c.CPU.Buckets = append(c.CPU.Buckets, c.CPU.Buckets[0]) }},
		{"negative count", func(c *ContainerCheckpoint) { c.TotalSamplesCount = -1 }},
		{"times reversed", func(c *ContainerCheckpoint) { c.FirstSampleStart = c.LastSampleStart.Add(time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := s.Checkpoint()
			cp.CPU.Buckets = append([]BucketWeight(nil), cp.CPU.Buckets...)
			tc.mutate(&cp)
			_, s2 := newState(t, Options{})
			if err := s2.Restore(cp); err == nil {
				t.Fatal("want error")
			}
			if s2.Samples() != 0 || !s2.CPU().IsEmpty() {
				t.Error("failed restore modified the state")
			}
		})
	}
	if _, err := DecodeCheckpoint([]byte(`{"cpu":{},"bogus":1}`)); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown field: err = %v", err)
	}
	_ = good
}

func FuzzDecodeCheckpoint(f *testing.F) {
	_, s := newState(f, Options{})
	feed(f, s, t0, 20, 0.3, 400*mib)
	seed, _ := json.Marshal(s.Checkpoint())
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"cpu":{"numBuckets":176,"totalWeight":1e200,"buckets":[{"bucket":175,"weight":1e200}],"referenceTime":"2024-01-01T00:00:00Z"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := DecodeCheckpoint(data)
		if err != nil {
			return
		}
		r, s := newState(t, Options{})
		if err := s.Restore(cp); err != nil {
			return
		}
		// A restored state must keep working without NaNs.
		_ = s.AddCPUSample(cp.LastSampleStart.Add(time.Minute), 1, 1)
		_ = s.AddMemorySample(cp.LastMemorySample.Add(time.Minute), 1e8)
		e := r.Estimate(s, r.PodMinimum(1))
		for _, v := range []workload.Resources{e.Target, e.LowerBound, e.UpperBound} {
			if err := v.Valid(); err != nil {
				t.Fatalf("estimate after restore: %v", err)
			}
		}
	})
}

func TestPolicy(t *testing.T) {
	c := workload.Constraints{MinReplicas: 2, MaxReplicas: 10, Containers: []workload.ContainerPolicy{
		{Name: "side", Mode: workload.ContainerModeOff},
		{Name: "*", MaxAllowed: workload.Resources{CPU: 4}},
	}}
	p, err := NewPolicyFactory(PolicyOptions{})(c)
	if err != nil {
		t.Fatal(err)
	}
	o := workload.Observation{Time: t0, Replicas: 5, ReadyReplicas: 5, Samples: 1, Containers: []workload.ContainerObservation{
		{Name: "app", Requests: workload.Resources{CPU: 1, Memory: 1e9}, Usage: workload.Resources{CPU: 0.2, Memory: 3e8}},
		{Name: "side", Requests: workload.Resources{CPU: 1, Memory: 1e9}, Usage: workload.Resources{CPU: 0.2, Memory: 3e8}},
	}}
	var rec workload.Recommendation
	for i := 0; i < 60; i++ {
		o.Time = t0.Add(time.Duration(i) * time.Minute)
		if rec, err = p.Recommend(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	if p.Name() != "vpa" || rec.Replicas != 5 {
		t.Errorf("name %q replicas %d: vpa must leave replicas alone", p.Name(), rec.Replicas)
	}
	if len(rec.Containers) != 1 || rec.Containers[0].Name != "app" {
		t.Fatalf("want only the controlled container, got %+v", rec.Containers)
	}
	// p90 is the end of the bucket holding 0.2 cores, plus the 15% margin.
	lay := CPUHistogramOptions()
	if got, want := rec.Containers[0].Target.CPU, lay.BucketStart(lay.FindBucket(0.2)+1)*1.15; math.Abs(got-want) > 1e-12 {
		t.Errorf("cpu target %g, want %g", got, want)
	}
	o.Containers[0].Usage.CPU = math.NaN()
	if _, err := p.Recommend(context.Background(), o); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN observation: err = %v", err)
	}
	if got := p.(*Policy).Recommender().State("app").Samples(); got != 60 {
		t.Errorf("samples %d: a bad observation must not reach the histogram", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{HalfLife: -time.Hour}, {TargetPercentile: 1.5}, {LowerBoundPercentile: 0.99},
		{SafetyMargin: math.NaN()}, {PodMinCPU: -1}, {OOMBumpRatio: 0.5},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: want error", o)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func BenchmarkAddSample(b *testing.B) {
	_, s := newState(b, Options{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		at := t0.Add(time.Duration(i) * 15 * time.Second)
		_ = s.AddCPUSample(at, 0.3+float64(i%100)/1000, 0.5)
		_ = s.AddMemorySample(at, 3e8+float64(i%100)*1e6)
	}
}

func BenchmarkRecommend(b *testing.B) {
	p, _ := NewPolicyFactory(PolicyOptions{})(workload.Constraints{})
	o := workload.Observation{Replicas: 5, ReadyReplicas: 5, Samples: 1, Containers: []workload.ContainerObservation{
		{Name: "app", Requests: workload.Resources{CPU: 1, Memory: 1e9}, Usage: workload.Resources{CPU: 0.2, Memory: 3e8}},
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o.Time = t0.Add(time.Duration(i) * 15 * time.Second)
		if _, err := p.Recommend(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}
