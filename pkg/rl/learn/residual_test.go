package learn

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func residualFixture() (workload.Observation, workload.Constraints, workload.Recommendation) {
	obs := workload.Observation{
		Replicas: 4,
		Containers: []workload.ContainerObservation{{
			Name:     "main",
			Requests: workload.Resources{CPU: 1, Memory: 1 << 30},
			Usage:    workload.Resources{CPU: 0.5, Memory: 600 << 20},
			Peak:     workload.Resources{CPU: 0.6, Memory: 700 << 20},
		}},
	}
	c := workload.Constraints{MinReplicas: 2, MaxReplicas: 6, Containers: []workload.ContainerPolicy{{
		Name: "*", Mode: workload.ContainerModeAuto,
		MinAllowed: workload.Resources{CPU: 0.1, Memory: 64 << 20},
		MaxAllowed: workload.Resources{CPU: 2, Memory: 4 << 30},
	}}}
	def := workload.Recommendation{Replicas: 5, Containers: []workload.ContainerRecommendation{{
		Name:       "main",
		Target:     workload.Resources{CPU: 0.8, Memory: 800 << 20},
		LowerBound: workload.Resources{CPU: 0.6, Memory: 700 << 20},
		UpperBound: workload.Resources{CPU: 1.9, Memory: 1200 << 20},
	}}, Source: workload.SourceDefault}
	return obs, c, def
}

func TestApplyResidual(t *testing.T) {
	obs, c, def := residualFixture()
	for _, tc := range []struct {
		name                 string
		spec                 string
		wantReplicas         int32
		wantCPU, wantCPULo   float64
		wantCPUHi, wantMemMi float64
		wantSource           workload.Source
	}{
		{"follow is the default", "", 5, 0.8, 0.6, 1.9, 800, workload.SourceDefault},
		{"offset", "replicas=+1", 6, 0.8, 0.6, 1.9, 800, workload.SourceAgent},
		{"offset clamped to max", "replicas=+2", 6, 0.8, 0.6, 1.9, 800, workload.SourceAgent},
		{"factor rounds", "replicas=x0.8", 4, 0.8, 0.6, 1.9, 800, workload.SourceAgent},
		{"hold replicas", "replicas=hold", 4, 0.8, 0.6, 1.9, 800, workload.SourceAgent},
		{"cpu factor scales target and bounds", "cpu=x1.15", 5, 0.92, 0.69, 2, 800, workload.SourceAgent},
		{"cpu clamped to minAllowed", "cpu=x0.1", 5, 0.1, 0.1, 0.19, 800, workload.SourceAgent},
		{"hold memory", "memory=hold", 5, 0.8, 0.6, 1.9, 1024, workload.SourceAgent},
		{"memory factor", "memory=x0.85", 5, 0.8, 0.6, 1.9, 680, workload.SourceAgent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := ParseResidual(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			rec := ApplyResidual(&obs, &c, def, ch)
			cr := rec.Containers[0]
			if rec.Replicas != tc.wantReplicas || rec.Source != tc.wantSource {
				t.Errorf("replicas %d source %s, want %d %s", rec.Replicas, rec.Source, tc.wantReplicas, tc.wantSource)
			}
			near := func(what string, got, want float64) {
				if d := got - want; d > 1e-9*want || d < -1e-9*want {
					t.Errorf("%s = %g, want %g", what, got, want)
				}
			}
			near("cpu target", cr.Target.CPU, tc.wantCPU)
			near("cpu lower", cr.LowerBound.CPU, tc.wantCPULo)
			near("cpu upper", cr.UpperBound.CPU, tc.wantCPUHi)
			near("memory target", cr.Target.Memory, tc.wantMemMi*(1<<20))
			if err := rec.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	// The default's slice is not aliased: applying a residual leaves it.
	ch, _ := ParseResidual("cpu=x2")
	ApplyResidual(&obs, &c, def, ch)
	if def.Containers[0].Target.CPU != 0.8 {
		t.Error("ApplyResidual changed the default's recommendation")
	}
}

func TestResidualMask(t *testing.T) {
	s := DefaultResidualSpace()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := s.Sizes(); got[0] != 8 || got[1] != 6 || got[2] != 6 {
		t.Errorf("sizes %v", got)
	}
	obs, c, def := residualFixture()
	m := ResidualMask(&obs, &c, def, &s)
	// def 5 replicas, bounds [2, 6]: -2 → 3, -1 → 4, +1 → 6 legal; +2 → 7
	// illegal; x0.8 → 4, x1.25 → 6 legal.
	if want := []bool{true, true, true, true, true, false, true, true}; !slices.Equal(m[DimReplicas], want) {
		t.Errorf("replica mask %v, want %v", m[DimReplicas], want)
	}
	for d := DimCPU; d <= DimMemory; d++ {
		for i, ok := range m[d] {
			if !ok {
				t.Errorf("%s choice %s illegal with usage far below the request", d, s[d][i])
			}
		}
	}
	// CPU peaked at 95% of the request: every cut of the capacity in force
	// (4 × 1 core) at the default's 0.8 core per pod is refused; the raises
	// stay.
	obs.Containers[0].Peak.CPU = 0.95
	m = ResidualMask(&obs, &c, def, &s)
	if want := []bool{true, true, false, false, true, false, false, true}; !slices.Equal(m[DimReplicas], want) {
		t.Errorf("hot replica mask %v, want %v", m[DimReplicas], want)
	}
	obs.Containers[0].Peak.CPU = 0.6
	// Memory peaked at 95% of the request: cuts below both the request and
	// the default's target are refused; follow, hold and raises stay.
	obs.Containers[0].Peak.Memory = 0.95 * (1 << 30)
	m = ResidualMask(&obs, &c, def, &s)
	if want := []bool{true, true, false, false, true, true}; !slices.Equal(m[DimMemory], want) {
		t.Errorf("memory mask %v, want %v", m[DimMemory], want)
	}
	if !m[DimCPU][2] {
		t.Error("the memory safeguard masked a CPU choice")
	}
	// A resource no container controls: only follow and hold.
	c.Containers[0].ControlledResources = []workload.Resource{workload.CPU}
	m = ResidualMask(&obs, &c, def, &s)
	if want := []bool{true, true, false, false, false, false}; !slices.Equal(m[DimMemory], want) {
		t.Errorf("uncontrolled memory mask %v, want %v", m[DimMemory], want)
	}
}

// TestReplicaCutRefused covers the safeguard across pods: a replica cut
// that lowers the CPU capacity of hot pods is refused, a consolidation into
// fewer, larger pods is not.
func TestReplicaCutRefused(t *testing.T) {
	s := DefaultResidualSpace()
	pod := func(replicas int32, req, peak float64) workload.Observation {
		return workload.Observation{Replicas: replicas, Containers: []workload.ContainerObservation{{
			Name:     "main",
			Requests: workload.Resources{CPU: req, Memory: 1 << 30},
			Usage:    workload.Resources{CPU: peak * 0.9, Memory: 300 << 20},
			Peak:     workload.Resources{CPU: peak, Memory: 300 << 20},
		}}}
	}
	rec := func(replicas int32, cpu float64) workload.Recommendation {
		return workload.Recommendation{Replicas: replicas, Containers: []workload.ContainerRecommendation{{
			Name:       "main",
			Target:     workload.Resources{CPU: cpu, Memory: 512 << 20},
			LowerBound: workload.Resources{CPU: cpu, Memory: 512 << 20},
			UpperBound: workload.Resources{CPU: cpu, Memory: 512 << 20},
		}}, Source: workload.SourceDefault}
	}
	wide := workload.Constraints{MinReplicas: 1, MaxReplicas: 10, Containers: []workload.ContainerPolicy{{Name: "*", Mode: workload.ContainerModeAuto}}}
	cpuOff := wide
	cpuOff.Containers = []workload.ContainerPolicy{{Name: "*", Mode: workload.ContainerModeAuto, ControlledResources: []workload.Resource{workload.Memory}}}
	// The replica choices: follow, hold, -2, -1, +1, +2, x0.8, x1.25.
	for _, tc := range []struct {
		name string
		obs  workload.Observation
		c    workload.Constraints
		def  workload.Recommendation
		want []bool
	}{
		{"hot 200m pods: no cut below the capacity in force (the node's case)", pod(3, 0.2, 0.2), wide, rec(3, 0.2),
			[]bool{true, true, false, false, true, true, false, true}},
		{"the same pods cold: every count in bounds", pod(3, 0.2, 0.1), wide, rec(3, 0.2),
			[]bool{true, true, true, true, true, true, true, true}},
		{"hot pods grown by the default: consolidating to fewer keeps the capacity", pod(3, 0.2, 0.19), wide, rec(2, 1),
			[]bool{true, true, false, true, true, true, true, true}},
		{"hot pods the default cuts: cutting further is refused", pod(4, 1, 0.95), wide, rec(3, 1),
			[]bool{true, true, false, false, true, true, false, true}},
		{"CPU not controlled: the request in force is the pod's CPU", pod(3, 0.5, 0.5), cpuOff, rec(3, 2),
			[]bool{true, true, false, false, true, true, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ResidualMask(&tc.obs, &tc.c, tc.def, &s)
			if !slices.Equal(m[DimReplicas], tc.want) {
				t.Errorf("replica mask %v, want %v", m[DimReplicas], tc.want)
			}
		})
	}
}

func TestParseResidual(t *testing.T) {
	for _, tc := range []struct {
		spec, want, wantErr string
	}{
		{"", "follow/follow/follow", ""},
		{"replicas=-2/cpu=x0.85/memory=hold", "-2/x0.85/hold", ""},
		{"memory=follow", "follow/follow/follow", ""},
		{"cpu=+1", "", "is not follow, hold"},
		{"disk=x2", "", `unknown dimension "disk"`},
		{"cpu=x-1", "", "must be a finite number > 0"},
		{"cpu", "", "is not dimension=choice"},
		{"replicas=+x", "", "is not an integer"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			ch, err := ParseResidual(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ch[0].String() + "/" + ch[1].String() + "/" + ch[2].String(); got != tc.want {
				t.Errorf("parsed %s, want %s", got, tc.want)
			}
		})
	}
}

type fixedPolicy struct{ rec workload.Recommendation }

func (f fixedPolicy) Name() string { return "fixed" }
func (f fixedPolicy) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	return f.rec, nil
}

// TestResidualPolicyFallsBack: a constant cut the safeguard refuses falls
// back to following the default in that dimension.
func TestResidualPolicyFallsBack(t *testing.T) {
	obs, c, def := residualFixture()
	ch, _ := ParseResidual("cpu=x1.15/memory=x0.7")
	p := NewResidualPolicy("r", fixedPolicy{def}, c, ch)
	rec, err := p.Recommend(context.Background(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Containers[0].Target.Memory; got != 0.7*800*(1<<20) {
		t.Errorf("memory %g: the cut should apply with room to spare", got)
	}
	obs.Containers[0].Peak.Memory = 0.95 * (1 << 30)
	rec, _ = p.Recommend(context.Background(), obs)
	if got := rec.Containers[0].Target; got.Memory != 800<<20 || math.Abs(got.CPU-0.8*1.15) > 1e-12 {
		t.Errorf("target %+v: memory should follow the default, CPU keep its raise", got)
	}
}

func TestChoiceValue(t *testing.T) {
	obs, c, def := residualFixture()
	// A second container: values are sums over containers.
	obs.Containers = append(obs.Containers, workload.ContainerObservation{Name: "side", Requests: workload.Resources{CPU: 0.5, Memory: 256 << 20}})
	def.Containers = append(def.Containers, workload.ContainerRecommendation{
		Name:       "side",
		Target:     workload.Resources{CPU: 0.2, Memory: 200 << 20},
		LowerBound: workload.Resources{CPU: 0.2, Memory: 200 << 20},
		UpperBound: workload.Resources{CPU: 0.4, Memory: 400 << 20},
	})
	for _, tc := range []struct {
		name string
		dim  Dimension
		ch   Choice
		want float64
	}{
		{"replicas follow", DimReplicas, Follow, 5},
		{"replicas offset clamped", DimReplicas, Choice{Offset: 2, Factor: 1}, 6},
		{"replicas hold", DimReplicas, Hold, 4},
		{"cpu follow", DimCPU, Follow, 1.0},
		{"cpu factor", DimCPU, Choice{Factor: 0.7}, 0.56 + 0.14},
		{"cpu hold is the requests in force", DimCPU, Hold, 1.5},
		{"memory factor", DimMemory, Choice{Factor: 1.3}, 1.3 * (1000 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChoiceValue(&obs, &c, def, tc.dim, tc.ch); math.Abs(got-tc.want) > 1e-9*tc.want {
				t.Errorf("%s %s: %g, want %g", tc.dim, tc.ch, got, tc.want)
			}
		})
	}
}
