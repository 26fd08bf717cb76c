// Package whatif answers "what would each policy have done on my cluster?"
// from a workload's recorded history: it fits the simulator's app to the
// history (Fit), replays every policy on the recorded request rate (Replay)
// and checks the replay against what actually ran (Consistency), whose
// error is the what-if's error bar.
//
// It works on plain series, one value per step, so it reads nothing a real
// cluster would not have and knows nothing of Prometheus: pkg/kube/usage
// reads the series and the recommender's whatif command wires the two. A
// NaN value is a gap (Prometheus had no sample at that step).
package whatif

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Series is one workload's history on a regular grid: index i is the step
// ending at Start + i·Step. Every slice that is set has len(Rate) values;
// NaN marks a gap. Requests and limits are per pod, summed over the pod's
// containers, as the simulator's single-container app sees them.
type Series struct {
	// Name identifies the workload ("namespace/deployment").
	Name string `json:"name"`
	// Container names the simulated app's container in recommendations.
	Container string    `json:"container"`
	Start     time.Time `json:"start"`
	// Step is in nanoseconds in JSON, as time.Duration encodes.
	Step time.Duration `json:"step"`
	// Rate is the workload's request rate (requests/s).
	Rate Values `json:"rate"`
	// CPU is the mean CPU usage per pod (cores); Memory the mean working
	// set per pod (bytes).
	CPU    Values `json:"cpu"`
	Memory Values `json:"memory"`
	// Replicas is the number of pods running.
	Replicas Values `json:"replicas"`
	// RequestCPU, RequestMemory, LimitCPU and LimitMemory are the per-pod
	// requests and limits (cores, bytes); a limit of 0 means none.
	RequestCPU    Values `json:"requestCPU"`
	RequestMemory Values `json:"requestMemory"`
	LimitCPU      Values `json:"limitCPU,omitempty"`
	LimitMemory   Values `json:"limitMemory,omitempty"`
	// P95 is the measured p95 latency (seconds); nil when no latency
	// metric was given.
	P95 Values `json:"p95,omitempty"`
	// InFlight is the requests in flight per pod, as the app's own gauge
	// counts them; nil when no such metric was given (the memory fit then
	// estimates them by Little's law).
	InFlight Values `json:"inFlight,omitempty"`
	// SLO is the p95 objective (seconds); 0 means none.
	SLO float64 `json:"slo,omitempty"`
	// StartupDelays are pods' seconds from start to Ready, one per pod
	// the history saw; may be empty.
	StartupDelays []float64 `json:"startupDelays,omitempty"`
}

// Values is a series, one value per step, NaN for a gap. JSON has no NaN:
// a gap is written as null and read back as NaN, so that whatif.json can
// carry the history to another replay (rl-agent whatif-replay).
type Values []float64

// MarshalJSON writes gaps (NaN, ±Inf) as null.
func (v Values) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+8*len(v))
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if !ok(x) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads null as NaN.
func (v *Values) UnmarshalJSON(b []byte) error {
	var ps []*float64
	if err := json.Unmarshal(b, &ps); err != nil {
		return err
	}
	if ps == nil {
		*v = nil
		return nil
	}
	out := make(Values, len(ps))
	for i, p := range ps {
		out[i] = math.NaN()
		if p != nil {
			out[i] = *p
		}
	}
	*v = out
	return nil
}

// ErrSeries is returned for a series the what-if cannot use at all.
var ErrSeries = errors.New("whatif: unusable series")

// Validate checks the shape: a positive step, a rate, and every set slice
// as long as the rate.
func (s *Series) Validate() error {
	if s.Step <= 0 {
		return fmt.Errorf("%w %q: step %s must be positive", ErrSeries, s.Name, s.Step)
	}
	if len(s.Rate) == 0 {
		return fmt.Errorf("%w %q: no request rate", ErrSeries, s.Name)
	}
	if s.Container == "" {
		return fmt.Errorf("%w %q: container name is empty", ErrSeries, s.Name)
	}
	if !(s.SLO >= 0) || math.IsInf(s.SLO, 0) {
		return fmt.Errorf("%w %q: SLO %g must be a finite number >= 0", ErrSeries, s.Name, s.SLO)
	}
	for _, f := range s.fields() {
		if f.required && len(f.v) == 0 {
			return fmt.Errorf("%w %q: %s is missing", ErrSeries, s.Name, f.name)
		}
		if len(f.v) != 0 && len(f.v) != len(s.Rate) {
			return fmt.Errorf("%w %q: %s has %d values, the rate %d", ErrSeries, s.Name, f.name, len(f.v), len(s.Rate))
		}
	}
	return nil
}

type field struct {
	name     string
	v        []float64
	required bool
}

func (s *Series) fields() []field {
	return []field{
		{"cpu", s.CPU, true}, {"memory", s.Memory, true}, {"replicas", s.Replicas, true},
		{"requestCPU", s.RequestCPU, true}, {"requestMemory", s.RequestMemory, true},
		{"limitCPU", s.LimitCPU, false}, {"limitMemory", s.LimitMemory, false}, {"p95", s.P95, false},
		{"inFlight", s.InFlight, false},
	}
}

// Duration is the length of the recorded period.
func (s *Series) Duration() time.Duration { return time.Duration(len(s.Rate)) * s.Step }

// ok reports whether every value is a usable number (not a gap).
func ok(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// at returns v[i], or NaN when v is not set.
func at(v []float64, i int) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return v[i]
}

// filled returns a copy of v whose gaps hold the last value before them
// (the first value after them for a leading gap), as a controller holds its
// last decision; ok is false when v has no value at all.
func filled(v []float64) (out []float64, okAll bool) {
	out = make([]float64, len(v))
	first := math.NaN()
	for _, x := range v {
		if ok(x) {
			first = x
			break
		}
	}
	if math.IsNaN(first) {
		return out, false
	}
	last := first
	for i, x := range v {
		if ok(x) {
			last = x
		}
		out[i] = last
	}
	return out, true
}
