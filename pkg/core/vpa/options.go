package vpa

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Upstream VPA recommender defaults.
const (
	DefaultHalfLife                  = 24 * time.Hour
	DefaultTargetPercentile          = 0.9
	DefaultLowerBoundPercentile      = 0.5
	DefaultUpperBoundPercentile      = 0.95
	DefaultSafetyMargin              = 0.15
	DefaultPodMinCPU                 = 0.025             // cores
	DefaultPodMinMemory              = 250 * 1024 * 1024 // bytes
	DefaultOOMBumpRatio              = 1.2
	DefaultOOMMinBump                = 100 * 1024 * 1024 // bytes
	DefaultMemoryAggregationInterval = 24 * time.Hour
	// DefaultConfidenceSamplesPerDay is upstream's assumption of one
	// sample per minute when turning a sample count into days of history.
	DefaultConfidenceSamplesPerDay = 24 * 60
	// Confidence multipliers (upstream): the upper bound is scaled by
	// (1 + 1/days)^1, the lower bound by (1 + 0.001/days)^-2.
	upperBoundMultiplier, upperBoundExponent = 1.0, 1.0
	lowerBoundMultiplier, lowerBoundExponent = 0.001, -2.0
)

// Options configures the VPA recommender. Zero fields mean the upstream
// default.
type Options struct {
	// HalfLife of sample weights.
	HalfLife time.Duration
	// Percentiles (in (0,1]) of the histograms that give the target and
	// the bounds.
	TargetPercentile     float64
	LowerBoundPercentile float64
	UpperBoundPercentile float64
	// SafetyMargin is added on top of every estimate (0.15 = +15%).
	SafetyMargin float64
	// PodMinCPU (cores) and PodMinMemory (bytes) are the per-pod floors,
	// split evenly among the pod's containers.
	PodMinCPU    float64
	PodMinMemory float64
	// OOMBumpRatio and OOMMinBump (bytes) size the memory sample recorded
	// on an OOM kill: max(used·ratio, used+minBump).
	OOMBumpRatio float64
	OOMMinBump   float64
	// MemoryAggregationInterval is the span over which one memory peak is kept.
	MemoryAggregationInterval time.Duration
	// ConfidenceSamplesPerDay converts a sample count into days of history
	// for the confidence multiplier.
	ConfidenceSamplesPerDay float64

	cpuLayout, memLayout HistogramOptions
}

// WithDefaults returns o with zero fields replaced by the defaults.
func (o Options) WithDefaults() Options {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if o.HalfLife == 0 {
		o.HalfLife = DefaultHalfLife
	}
	if o.MemoryAggregationInterval == 0 {
		o.MemoryAggregationInterval = DefaultMemoryAggregationInterval
	}
	def(&o.TargetPercentile, DefaultTargetPercentile)
	def(&o.LowerBoundPercentile, DefaultLowerBoundPercentile)
	def(&o.UpperBoundPercentile, DefaultUpperBoundPercentile)
	def(&o.SafetyMargin, DefaultSafetyMargin)
	def(&o.PodMinCPU, DefaultPodMinCPU)
	def(&o.PodMinMemory, DefaultPodMinMemory)
	def(&o.OOMBumpRatio, DefaultOOMBumpRatio)
	def(&o.OOMMinBump, DefaultOOMMinBump)
	def(&o.ConfidenceSamplesPerDay, DefaultConfidenceSamplesPerDay)
	return o
}

// Validate rejects options that cannot be used (after defaulting).
func (o Options) Validate() error {
	o = o.WithDefaults()
	var errs []error
	if o.HalfLife < 0 || o.HalfLife > MaxHalfLife {
		errs = append(errs, fmt.Errorf("halfLife must be within (0, %s], got %s", MaxHalfLife, o.HalfLife))
	}
	if o.MemoryAggregationInterval < 0 {
		errs = append(errs, fmt.Errorf("memoryAggregationInterval must be > 0, got %s", o.MemoryAggregationInterval))
	}
	for _, p := range []struct {
		n string
		v float64
	}{{"targetPercentile", o.TargetPercentile}, {"lowerBoundPercentile", o.LowerBoundPercentile}, {"upperBoundPercentile", o.UpperBoundPercentile}} {
		if !(p.v > 0 && p.v <= 1) {
			errs = append(errs, fmt.Errorf("%s must be within (0, 1], got %g", p.n, p.v))
		}
	}
	if o.LowerBoundPercentile > o.TargetPercentile || o.TargetPercentile > o.UpperBoundPercentile {
		errs = append(errs, errors.New("percentiles must satisfy lowerBound <= target <= upperBound"))
	}
	for _, p := range []struct {
		n string
		v float64
	}{{"safetyMargin", o.SafetyMargin}, {"podMinCPU", o.PodMinCPU}, {"podMinMemory", o.PodMinMemory}, {"oomMinBump", o.OOMMinBump}, {"confidenceSamplesPerDay", o.ConfidenceSamplesPerDay}} {
		if math.IsNaN(p.v) || math.IsInf(p.v, 0) || p.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be finite and non-negative, got %g", p.n, p.v))
		}
	}
	if !(o.OOMBumpRatio >= 1) || math.IsInf(o.OOMBumpRatio, 0) {
		errs = append(errs, fmt.Errorf("oomBumpRatio must be finite and >= 1, got %g", o.OOMBumpRatio))
	}
	return errors.Join(errs...)
}

// prepared validates, defaults and fills in the histogram layouts.
func (o Options) prepared() (Options, error) {
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	o = o.WithDefaults()
	o.cpuLayout, o.memLayout = CPUHistogramOptions(), MemoryHistogramOptions()
	return o, nil
}

// HistogramMaxCPU is the largest CPU amount (cores) the CPU histogram
// distinguishes; estimates are saturated there.
func (o Options) HistogramMaxCPU() float64 { return CPUHistogramOptions().MaxValue }
