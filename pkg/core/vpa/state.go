package vpa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// minSampleWeight is the weight of a CPU sample from a container without a
// request (upstream: 0.1), so such samples still count.
const minSampleWeight = 0.1

// ContainerState aggregates one container's usage history: CPU samples
// weighted by the request at the time (a container that was given more CPU
// says more about what it needs), and memory as one peak per aggregation
// interval (working-set spikes, not averages, are what OOM-kills). It is not
// safe for concurrent use.
type ContainerState struct {
	opts *Options
	cpu  *DecayingHistogram
	mem  *DecayingHistogram

	firstSample time.Time
	lastSample  time.Time
	samples     int64

	// Memory peak bookkeeping (upstream ContainerState): the current
	// interval ends at windowEnd; its usage peak memPeak and OOM-derived
	// peak oomPeak are kept apart so repeated OOMs do not compound, and
	// max(memPeak, oomPeak) is the interval's single entry in the histogram
	// at windowEnd.
	windowEnd      time.Time
	memPeak        float64
	oomPeak        float64
	lastMemorySeen time.Time
}

func newContainerState(o *Options) *ContainerState {
	cpu, _ := NewDecayingHistogram(&o.cpuLayout, o.HalfLife)
	mem, _ := NewDecayingHistogram(&o.memLayout, o.HalfLife)
	return &ContainerState{opts: o, cpu: cpu, mem: mem}
}

// AddCPUSample records mean CPU usage (cores) at t, weighted by the request.
func (s *ContainerState) AddCPUSample(t time.Time, usage, request float64) error {
	if math.IsNaN(request) || math.IsInf(request, 0) || request < 0 {
		return fmt.Errorf("cpu request must be finite and non-negative, got %g", request)
	}
	if err := s.cpu.AddSample(usage, max(request, minSampleWeight), t); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if t.After(s.lastSample) {
		s.lastSample = t
	}
	if s.firstSample.IsZero() || t.Before(s.firstSample) {
		s.firstSample = t
	}
	s.samples++
	return nil
}

// AddMemorySample records a memory working-set sample (bytes) at t. Samples
// older than the last one are discarded, as upstream does.
func (s *ContainerState) AddMemorySample(t time.Time, usage float64) error {
	return s.addMemory(t, usage, false)
}

func (s *ContainerState) addMemory(t time.Time, usage float64, oom bool) error {
	if err := checkSample(usage, 1); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if !oom && t.Before(s.lastMemorySeen) {
		return nil
	}
	s.lastMemorySeen = t
	// The interval has an entry in the histogram iff windowEnd is set.
	hasEntry := !s.windowEnd.IsZero()
	if !hasEntry {
		s.windowEnd = t
	}
	if !t.Before(s.windowEnd) {
		iv := s.opts.MemoryAggregationInterval
		s.windowEnd = s.windowEnd.Add(t.Sub(s.windowEnd).Truncate(iv) + iv)
		s.memPeak, s.oomPeak = 0, 0
		hasEntry = false
	}
	old := max(s.memPeak, s.oomPeak)
	if oom {
		s.oomPeak = max(s.oomPeak, usage)
	} else {
		s.memPeak = max(s.memPeak, usage)
	}
	peak := max(s.memPeak, s.oomPeak)
	if hasEntry {
		if peak == old {
			return nil
		}
		// One entry per interval: replace the old peak with the new one.
		if err := s.mem.SubtractSample(old, 1, s.windowEnd); err != nil {
			return err
		}
	}
	return s.mem.AddSample(peak, 1, s.windowEnd)
}

// RecordOOM records an OOM kill at t of a container that was using
// memoryUsed bytes (its limit, or the best known working set). The
// recommendation must move above that: the sample is the larger of
// memoryUsed·OOMBumpRatio and memoryUsed+OOMMinBump.
func (s *ContainerState) RecordOOM(t time.Time, memoryUsed float64) error {
	if math.IsNaN(memoryUsed) || math.IsInf(memoryUsed, 0) || memoryUsed < 0 {
		return fmt.Errorf("memory at OOM must be finite and non-negative, got %g", memoryUsed)
	}
	if !s.windowEnd.IsZero() && t.Before(s.windowEnd.Add(-s.opts.MemoryAggregationInterval)) {
		return fmt.Errorf("OOM at %s is older than the current aggregation interval", t)
	}
	return s.addMemory(t, s.OOMNeed(memoryUsed), true)
}

// OOMNeed is the memory RecordOOM records for a kill at memoryUsed: the
// larger of the kill's memory and the interval's peak, bumped by
// OOMBumpRatio and at least OOMMinBump.
func (s *ContainerState) OOMNeed(memoryUsed float64) float64 {
	used := max(memoryUsed, s.memPeak)
	return max(used+s.opts.OOMMinBump, used*s.opts.OOMBumpRatio)
}

// Samples returns the number of CPU samples recorded.
func (s *ContainerState) Samples() int64 { return s.samples }

// CPU and Memory expose the histograms (read-only use).
func (s *ContainerState) CPU() *DecayingHistogram    { return s.cpu }
func (s *ContainerState) Memory() *DecayingHistogram { return s.mem }

// Confidence is upstream's history-length measure in days: the smaller of
// the sample span and the sample count normalised to SamplesPerDay.
func (s *ContainerState) Confidence() float64 {
	span := float64(s.lastSample.Sub(s.firstSample)) / float64(24*time.Hour)
	count := float64(s.samples) / s.opts.ConfidenceSamplesPerDay
	return math.Min(span, count)
}

// ContainerCheckpoint is a container's aggregated history as plain data, for
// persisting in a MultidimPodAutoscalerCheckpoint.
type ContainerCheckpoint struct {
	CPU               HistogramCheckpoint `json:"cpu"`
	Memory            HistogramCheckpoint `json:"memory"`
	FirstSampleStart  time.Time           `json:"firstSampleStart"`
	LastSampleStart   time.Time           `json:"lastSampleStart"`
	TotalSamplesCount int64               `json:"totalSamplesCount"`
	MemoryWindowEnd   time.Time           `json:"memoryWindowEnd"`
	MemoryPeak        float64             `json:"memoryPeak"`
	MemoryOOMPeak     float64             `json:"memoryOOMPeak"`
	LastMemorySample  time.Time           `json:"lastMemorySample"`
}

// Checkpoint exports the state.
func (s *ContainerState) Checkpoint() ContainerCheckpoint {
	return ContainerCheckpoint{
		CPU: s.cpu.Checkpoint(), Memory: s.mem.Checkpoint(),
		FirstSampleStart: s.firstSample, LastSampleStart: s.lastSample, TotalSamplesCount: s.samples,
		MemoryWindowEnd: s.windowEnd, MemoryPeak: s.memPeak, MemoryOOMPeak: s.oomPeak, LastMemorySample: s.lastMemorySeen,
	}
}

// Restore replaces the state with cp after validating all of it; on error
// the state is unchanged.
func (s *ContainerState) Restore(cp ContainerCheckpoint) error {
	if cp.TotalSamplesCount < 0 {
		return fmt.Errorf("totalSamplesCount must be >= 0, got %d", cp.TotalSamplesCount)
	}
	if cp.LastSampleStart.Before(cp.FirstSampleStart) {
		return errors.New("lastSampleStart is before firstSampleStart")
	}
	for _, v := range []float64{cp.MemoryPeak, cp.MemoryOOMPeak} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("memory peaks must be finite and non-negative, got %g", v)
		}
	}
	cpu, _ := NewDecayingHistogram(&s.opts.cpuLayout, s.opts.HalfLife)
	if err := cpu.Restore(cp.CPU); err != nil {
		return fmt.Errorf("cpu histogram: %w", err)
	}
	mem, _ := NewDecayingHistogram(&s.opts.memLayout, s.opts.HalfLife)
	if err := mem.Restore(cp.Memory); err != nil {
		return fmt.Errorf("memory histogram: %w", err)
	}
	s.cpu, s.mem = cpu, mem
	s.firstSample, s.lastSample, s.samples = cp.FirstSampleStart, cp.LastSampleStart, cp.TotalSamplesCount
	s.windowEnd, s.memPeak, s.oomPeak, s.lastMemorySeen = cp.MemoryWindowEnd, cp.MemoryPeak, cp.MemoryOOMPeak, cp.LastMemorySample
	return nil
}

// DecodeCheckpoint parses a JSON-encoded ContainerCheckpoint strictly
// (unknown fields are an error). The result still has to pass
// ContainerState.Restore, which checks its contents.
func DecodeCheckpoint(data []byte) (ContainerCheckpoint, error) {
	var cp ContainerCheckpoint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		return ContainerCheckpoint{}, fmt.Errorf("decoding checkpoint: %w", err)
	}
	if dec.More() {
		return ContainerCheckpoint{}, errors.New("decoding checkpoint: trailing data after the object")
	}
	return cp, nil
}
