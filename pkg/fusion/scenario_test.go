package fusion

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/vpa"
	"github.com/aware-k8s/aware/pkg/workload"
)

// closedLoop is a closed-form load model: a fixed total CPU demand spread
// evenly over the replicas, each pod's usage capped at its CPU limit, and a
// constant memory working set. Recommendations are applied at once.
type closedLoop struct {
	demand   func(tick int) float64 // total cores
	memory   float64                // bytes per pod
	replicas int32
	request  workload.Resources
	limit    workload.Resources
}

func (m *closedLoop) observe(tick int, t time.Time) workload.Observation {
	u := math.Min(m.demand(tick)/float64(m.replicas), m.limit.CPU)
	return workload.Observation{
		Time: t, Window: 15 * time.Second, Replicas: m.replicas, ReadyReplicas: m.replicas, Samples: 1,
		Containers: []workload.ContainerObservation{{
			Name: "app", Requests: m.request, Limits: m.limit,
			Usage: workload.Resources{CPU: u, Memory: m.memory},
			Peak:  workload.Resources{CPU: u, Memory: m.memory},
		}},
	}
}

func (m *closedLoop) apply(rec workload.Recommendation) {
	m.replicas = rec.Replicas
	if c, ok := rec.Container("app"); ok {
		m.limit, _ = vpa.ScaleLimits(m.request, c.Target, m.limit)
		m.request = c.Target
	}
}

type trajectory struct {
	replicas []int32
	cpu      []float64
}

// changes counts ticks at which replicas or the CPU request moved by more
// than 1%.
func (tr trajectory) changes(from int) int {
	n := 0
	for i := from + 1; i < len(tr.replicas); i++ {
		if tr.replicas[i] != tr.replicas[i-1] || math.Abs(tr.cpu[i]-tr.cpu[i-1]) > 0.01*tr.cpu[i-1] {
			n++
		}
	}
	return n
}

func run(t *testing.T, f workload.PolicyFactory, c workload.Constraints, m closedLoop, ticks int) trajectory {
	t.Helper()
	p, err := f(c)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var tr trajectory
	for i := 0; i < ticks; i++ {
		rec, err := p.Recommend(context.Background(), m.observe(i, t0.Add(time.Duration(i)*15*time.Second)))
		if err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
		if err := rec.Validate(); err != nil {
			t.Fatalf("tick %d: invalid recommendation: %v", i, err)
		}
		m.apply(rec)
		tr.replicas = append(tr.replicas, m.replicas)
		tr.cpu = append(tr.cpu, m.request.CPU)
	}
	return tr
}

// chases counts vertical shrinks answered by a horizontal scale-out before
// the next vertical change: the two loops correcting for each other.
func (tr trajectory) chases() int {
	n := 0
	for i := 1; i < len(tr.cpu); i++ {
		if tr.cpu[i] >= tr.cpu[i-1]*0.99 {
			continue
		}
		for j := i + 1; j < len(tr.cpu) && tr.cpu[j] == tr.cpu[i]; j++ {
			if tr.replicas[j] > tr.replicas[j-1] {
				n++
				break
			}
		}
	}
	return n
}

func TestNaiveOscillatesFusedSettles(t *testing.T) {
	const ticks = 12 * 60 * 4 // twelve hours at 15 s
	const half = ticks / 2
	c := workload.Constraints{MinReplicas: 1, MaxReplicas: 50}
	// A short half-life lets the histograms react within the run; it
	// affects both policies alike.
	opts := Options{VPA: vpa.Options{HalfLife: time.Hour}}
	for _, tc := range []struct {
		name   string
		demand func(int) float64
	}{
		{"fixed demand", func(int) float64 { return 4 }},
		{"demand doubles after two hours", func(i int) float64 {
			if i < 2*60*4 {
				return 4
			}
			return 8
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := closedLoop{
				demand: tc.demand, memory: 300 << 20, replicas: 4,
				request: workload.Resources{CPU: 0.5, Memory: 512 << 20},
				limit:   workload.Resources{CPU: 1, Memory: 1 << 30},
			}
			naive := run(t, NewNaiveFactory(opts), c, start, ticks)
			fused := run(t, NewPolicyFactory(opts), c, start, ticks)
			t.Logf("naive: end %d x %.3f, chases=%d, changes in 2nd half=%d", naive.replicas[ticks-1], naive.cpu[ticks-1], naive.chases(), naive.changes(half))
			t.Logf("fused: end %d x %.3f, chases=%d, changes in 2nd half=%d", fused.replicas[ticks-1], fused.cpu[ticks-1], fused.chases(), fused.changes(half))

			if got := naive.chases(); got < 3 {
				t.Errorf("naive hpa+vpa: %d vertical shrinks answered by scale-outs, want >= 3 (the loops should chase each other)", got)
			}
			if got := naive.changes(half); got == 0 {
				t.Errorf("naive hpa+vpa settled in the second half; expected it to keep moving")
			}
			if got := fused.chases(); got != 0 {
				t.Errorf("fused: %d vertical shrinks answered by scale-outs, want 0", got)
			}
			if got := fused.changes(half); got != 0 {
				t.Errorf("fused: %d changes in the second half, want 0 (settled)", got)
			}
			// Settled where the HPA target holds against the request it set.
			d := tc.demand(ticks - 1)
			util := d / float64(fused.replicas[ticks-1]) / fused.cpu[ticks-1]
			if util < 0.6 || util > 0.7*1.1 {
				t.Errorf("fused settled at utilisation %.2f of the request, want about 0.7", util)
			}
		})
	}
}
