package usage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// MaxHistoryPoints bounds the points of one range query per series
// (Prometheus refuses more than 11,000).
const MaxHistoryPoints = 11000

// HistoryQuery asks for the usage of the pods matching PodRegex in
// Namespace from Start to End at Step.
type HistoryQuery struct {
	Namespace string
	PodRegex  string
	Start     time.Time
	End       time.Time
	Step      time.Duration
	// Timeout bounds each of the two range queries; zero means the
	// source's query timeout.
	Timeout time.Duration
}

// Point is a value at a time.
type Point struct {
	Time  time.Time
	Value float64
}

// ContainerHistory is one container's usage over time, aggregated over the
// pods as the recommender's live observation is: CPU is the mean over
// pods (cores), memory the maximum over pods (working-set bytes). Points
// are in time order.
type ContainerHistory struct {
	Name   string
	CPU    []Point
	Memory []Point
}

// History is the result of a history query.
type History struct {
	// Containers are sorted by name.
	Containers []ContainerHistory
	// Dropped counts NaN, infinite and negative samples discarded.
	Dropped Drops
}

// History reads past CPU and memory usage with range queries of the cpu
// and memory templates (the rate and max_over_time window is the step).
func (p *Prometheus) History(ctx context.Context, q HistoryQuery) (History, error) {
	h := History{Dropped: Drops{}}
	if err := validNamespace(q.Namespace); err != nil {
		return h, err
	}
	if q.PodRegex == "" {
		return h, errors.New("history: empty pod regex")
	}
	if q.Step <= 0 || !q.End.After(q.Start) {
		return h, fmt.Errorf("history: need step > 0 and end after start, got step %s, %s..%s", q.Step, q.Start, q.End)
	}
	if n := q.End.Sub(q.Start) / q.Step; n > MaxHistoryPoints {
		return h, fmt.Errorf("history: %d points per series exceed %d; raise the step", n, MaxHistoryPoints)
	}
	timeout := q.Timeout
	if timeout <= 0 {
		timeout = p.timeout
	}
	d := QueryData{Namespace: q.Namespace, PodRegex: quote(q.PodRegex), Window: Window(q.Step)}
	r := promv1.Range{Start: q.Start, End: q.End, Step: q.Step}
	type acc struct {
		sum float64
		n   int
	}
	cpu := map[string]map[int64]*acc{}    // container → unix ms → sum over pods
	mem := map[string]map[int64]float64{} // container → unix ms → max over pods
	for _, res := range []string{qCPU, qMemory} {
		query, err := p.Render(res, d)
		if err != nil {
			return h, err
		}
		m, err := p.ranged(ctx, res, query, r, timeout)
		if err != nil {
			return h, err
		}
		for _, ss := range m {
			c := string(ss.Metric["container"])
			if c == "" {
				continue
			}
			for _, v := range ss.Values {
				x := float64(v.Value)
				if pr := problem(x); pr != "" {
					h.Dropped[pr]++
					continue
				}
				t := int64(v.Timestamp)
				if res == qCPU {
					if cpu[c] == nil {
						cpu[c] = map[int64]*acc{}
					}
					a := cpu[c][t]
					if a == nil {
						a = &acc{}
						cpu[c][t] = a
					}
					a.sum += x
					a.n++
				} else {
					if mem[c] == nil {
						mem[c] = map[int64]float64{}
					}
					if old, ok := mem[c][t]; !ok || x > old {
						mem[c][t] = x
					}
				}
			}
		}
	}
	names := map[string]bool{}
	for c := range cpu {
		names[c] = true
	}
	for c := range mem {
		names[c] = true
	}
	for c := range names {
		ch := ContainerHistory{Name: c}
		for t, a := range cpu[c] {
			ch.CPU = append(ch.CPU, Point{Time: time.UnixMilli(t).UTC(), Value: a.sum / float64(a.n)})
		}
		for t, x := range mem[c] {
			ch.Memory = append(ch.Memory, Point{Time: time.UnixMilli(t).UTC(), Value: x})
		}
		byTime := func(a, b Point) int { return a.Time.Compare(b.Time) }
		slices.SortFunc(ch.CPU, byTime)
		slices.SortFunc(ch.Memory, byTime)
		h.Containers = append(h.Containers, ch)
	}
	slices.SortFunc(h.Containers, func(a, b ContainerHistory) int { return strings.Compare(a.Name, b.Name) })
	return h, nil
}
