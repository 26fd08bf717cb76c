package vpa

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// HistogramOptions describes an exponential bucket layout: bucket i covers
// [FirstBucketSize·(Ratio^i−1)/(Ratio−1), the same for i+1), so bucket
// widths grow by Ratio and the relative error of a percentile is bounded by
// Ratio−1 regardless of magnitude.
type HistogramOptions struct {
	MaxValue        float64
	FirstBucketSize float64
	Ratio           float64
	// Epsilon is the weight below which a bucket counts as empty.
	Epsilon    float64
	numBuckets int
}

// NewHistogramOptions validates the layout and precomputes the bucket count.
func NewHistogramOptions(maxValue, firstBucketSize, ratio, epsilon float64) (HistogramOptions, error) {
	if !(firstBucketSize > 0) || math.IsInf(firstBucketSize, 0) {
		return HistogramOptions{}, fmt.Errorf("first bucket size must be positive, got %g", firstBucketSize)
	}
	if !(maxValue > firstBucketSize) || math.IsInf(maxValue, 0) {
		return HistogramOptions{}, fmt.Errorf("max value must be finite and above the first bucket size, got %g", maxValue)
	}
	if !(ratio > 1) || math.IsInf(ratio, 0) {
		return HistogramOptions{}, fmt.Errorf("ratio must be > 1, got %g", ratio)
	}
	if !(epsilon > 0) || math.IsInf(epsilon, 0) {
		return HistogramOptions{}, fmt.Errorf("epsilon must be positive, got %g", epsilon)
	}
	n := int(math.Ceil(math.Log(maxValue*(ratio-1)/firstBucketSize+1)/math.Log(ratio))) + 1
	if n > 1<<16 {
		return HistogramOptions{}, fmt.Errorf("layout needs %d buckets; at most 65536 are allowed", n)
	}
	return HistogramOptions{MaxValue: maxValue, FirstBucketSize: firstBucketSize, Ratio: ratio, Epsilon: epsilon, numBuckets: n}, nil
}

// CPUHistogramOptions is VPA's CPU layout: 0.01 cores first bucket, 5%
// growth, up to 1000 cores.
func CPUHistogramOptions() HistogramOptions {
	o, _ := NewHistogramOptions(1000, 0.01, 1.05, 1e-4)
	return o
}

// MemoryHistogramOptions is VPA's memory layout: 10 MB first bucket, 5%
// growth, up to 1 TB.
func MemoryHistogramOptions() HistogramOptions {
	o, _ := NewHistogramOptions(1e12, 1e7, 1.05, 1e-4)
	return o
}

// NumBuckets is the number of buckets.
func (o *HistogramOptions) NumBuckets() int { return o.numBuckets }

// FindBucket returns the bucket holding value; values past MaxValue land in
// the last bucket.
func (o *HistogramOptions) FindBucket(value float64) int {
	if value < o.FirstBucketSize {
		return 0
	}
	b := int(math.Log(value*(o.Ratio-1)/o.FirstBucketSize+1) / math.Log(o.Ratio))
	return min(max(b, 0), o.numBuckets-1)
}

// BucketStart returns the lower edge of bucket b.
func (o *HistogramOptions) BucketStart(b int) float64 {
	if b <= 0 {
		return 0
	}
	return o.FirstBucketSize * (math.Pow(o.Ratio, float64(b)) - 1) / (o.Ratio - 1)
}

// maxDecayExponent bounds the growth of sample weights (2^100) before the
// reference time is moved forward, as upstream does.
const maxDecayExponent = 100

// MaxHalfLife keeps halfLife·maxDecayExponent within a time.Duration.
const MaxHalfLife = 365 * 24 * time.Hour

// DecayingHistogram is a weighted histogram in which a sample's weight
// halves every HalfLife. Like upstream VPA it never rewrites old weights:
// a sample at time t is stored with weight w·2^((t−ref)/halfLife), so newer
// samples weigh more and percentiles (ratios of weights) see the decay.
// When the exponent would exceed 100, ref moves forward and every weight is
// divided by the same power of two. Invariant: total equals the sum of
// bucket weights, and every bucket outside [minBucket, maxBucket] is below
// Epsilon.
type DecayingHistogram struct {
	opts      *HistogramOptions
	halfLife  time.Duration
	ref       time.Time
	weights   []float64
	total     float64
	minBucket int
	maxBucket int
}

// NewDecayingHistogram returns an empty histogram.
func NewDecayingHistogram(opts *HistogramOptions, halfLife time.Duration) (*DecayingHistogram, error) {
	if opts == nil || opts.numBuckets == 0 {
		return nil, errors.New("histogram options are not initialised; use NewHistogramOptions")
	}
	if halfLife <= 0 || halfLife > MaxHalfLife {
		return nil, fmt.Errorf("half-life must be within (0, %s], got %s", MaxHalfLife, halfLife)
	}
	h := &DecayingHistogram{opts: opts, halfLife: halfLife, weights: make([]float64, opts.numBuckets)}
	h.reset()
	return h, nil
}

func (h *DecayingHistogram) reset() {
	clear(h.weights)
	h.total = 0
	h.minBucket = h.opts.numBuckets - 1
	h.maxBucket = 0
}

// IsEmpty reports whether the histogram holds no weight.
func (h *DecayingHistogram) IsEmpty() bool {
	return h.weights[h.minBucket] < h.opts.Epsilon
}

func checkSample(value, weight float64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return fmt.Errorf("sample value must be finite and non-negative, got %g", value)
	}
	if math.IsNaN(weight) || math.IsInf(weight, 0) || weight < 0 {
		return fmt.Errorf("sample weight must be finite and non-negative, got %g", weight)
	}
	return nil
}

// AddSample adds value with weight at time t.
func (h *DecayingHistogram) AddSample(value, weight float64, t time.Time) error {
	if err := checkSample(value, weight); err != nil {
		return err
	}
	w := weight * h.decayFactor(t)
	b := h.opts.FindBucket(value)
	h.weights[b] += w
	h.total += w
	if h.weights[b] >= h.opts.Epsilon {
		h.minBucket = min(h.minBucket, b)
		h.maxBucket = max(h.maxBucket, b)
	}
	return nil
}

// SubtractSample removes weight previously added for value at time t; a
// bucket never goes negative.
func (h *DecayingHistogram) SubtractSample(value, weight float64, t time.Time) error {
	if err := checkSample(value, weight); err != nil {
		return err
	}
	w := weight * h.decayFactor(t)
	b := h.opts.FindBucket(value)
	w = min(w, h.weights[b])
	h.weights[b] -= w
	h.total = max(h.total-w, 0)
	h.updateMinMax()
	return nil
}

func (h *DecayingHistogram) decayFactor(t time.Time) float64 {
	if h.ref.IsZero() {
		h.ref = t.Round(h.halfLife)
	}
	if t.After(h.ref.Add(h.halfLife * maxDecayExponent)) {
		h.shiftReference(t)
	}
	return math.Exp2(float64(t.Sub(h.ref)) / float64(h.halfLife))
}

// shiftReference moves ref to t (rounded to a whole number of half-lives so
// the rescale is an exact power of two) and rescales the weights.
func (h *DecayingHistogram) shiftReference(t time.Time) {
	newRef := t.Round(h.halfLife)
	exp := math.Round(float64(h.ref.Sub(newRef)) / float64(h.halfLife))
	h.scale(math.Ldexp(1, int(exp)))
	h.ref = newRef
}

func (h *DecayingHistogram) scale(f float64) {
	h.total = 0
	for i := range h.weights {
		h.weights[i] *= f
		h.total += h.weights[i]
	}
	h.updateMinMax()
}

func (h *DecayingHistogram) updateMinMax() {
	lo, hi := h.opts.numBuckets-1, 0
	for i, w := range h.weights {
		if w >= h.opts.Epsilon {
			lo = min(lo, i)
			hi = max(hi, i)
		}
	}
	h.minBucket, h.maxBucket = lo, hi
}

// Percentile returns an upper estimate of the p-th percentile (p in [0,1]):
// the end of the first bucket at which the cumulative weight reaches
// p·total. It returns 0 for an empty histogram.
func (h *DecayingHistogram) Percentile(p float64) float64 {
	if h.IsEmpty() {
		return 0
	}
	threshold := p * h.total
	sum := 0.0
	b := h.minBucket
	for ; b < h.maxBucket; b++ {
		sum += h.weights[b]
		if sum >= threshold {
			break
		}
	}
	if b < h.opts.numBuckets-1 {
		return h.opts.BucketStart(b + 1)
	}
	return h.opts.BucketStart(b)
}

// TotalWeight returns the total weight expressed at time now, i.e. with the
// decay since each sample applied: a sample of weight 1 added at t weighs
// 2^−((now−t)/halfLife).
func (h *DecayingHistogram) TotalWeight(now time.Time) float64 {
	if h.ref.IsZero() {
		return 0
	}
	return h.total * math.Exp2(-float64(now.Sub(h.ref))/float64(h.halfLife))
}

// maxCheckpointWeight bounds imported weights far below overflow: live
// weights never exceed about 2^100 times the largest sample weight, and a
// larger value could only overflow to Inf (and then NaN) on later updates.
const maxCheckpointWeight = 1e200

// HistogramCheckpoint is a histogram's state as plain data. Weights are the
// stored (undecayed, reference-relative) weights, so a round trip is exact.
type HistogramCheckpoint struct {
	ReferenceTime time.Time      `json:"referenceTime"`
	TotalWeight   float64        `json:"totalWeight"`
	NumBuckets    int            `json:"numBuckets"`
	Buckets       []BucketWeight `json:"buckets,omitempty"`
}

// BucketWeight is one non-empty bucket.
type BucketWeight struct {
	Bucket int     `json:"bucket"`
	Weight float64 `json:"weight"`
}

// Checkpoint exports the histogram.
func (h *DecayingHistogram) Checkpoint() HistogramCheckpoint {
	cp := HistogramCheckpoint{ReferenceTime: h.ref, TotalWeight: h.total, NumBuckets: h.opts.numBuckets}
	for i, w := range h.weights {
		if w > 0 {
			cp.Buckets = append(cp.Buckets, BucketWeight{Bucket: i, Weight: w})
		}
	}
	return cp
}

// Restore replaces the histogram's state with cp after validating it
// completely; on error the histogram is unchanged.
func (h *DecayingHistogram) Restore(cp HistogramCheckpoint) error {
	if cp.NumBuckets != h.opts.numBuckets {
		return fmt.Errorf("checkpoint has %d buckets, histogram layout has %d", cp.NumBuckets, h.opts.numBuckets)
	}
	if math.IsNaN(cp.TotalWeight) || cp.TotalWeight < 0 || cp.TotalWeight > maxCheckpointWeight {
		return fmt.Errorf("total weight must be within [0, %g], got %g", maxCheckpointWeight, cp.TotalWeight)
	}
	if cp.ReferenceTime.IsZero() && len(cp.Buckets) > 0 {
		return errors.New("checkpoint has weights but no reference time")
	}
	weights := make([]float64, h.opts.numBuckets)
	sum := 0.0
	for i, bw := range cp.Buckets {
		if bw.Bucket < 0 || bw.Bucket >= h.opts.numBuckets {
			return fmt.Errorf("buckets[%d]: index %d out of range [0, %d)", i, bw.Bucket, h.opts.numBuckets)
		}
		if math.IsNaN(bw.Weight) || math.IsInf(bw.Weight, 0) || bw.Weight < 0 {
			return fmt.Errorf("buckets[%d]: weight must be finite and non-negative, got %g", i, bw.Weight)
		}
		if weights[bw.Bucket] != 0 {
			return fmt.Errorf("buckets[%d]: bucket %d appears twice", i, bw.Bucket)
		}
		weights[bw.Bucket] = bw.Weight
		sum += bw.Weight
	}
	if math.IsInf(sum, 0) {
		return errors.New("bucket weights overflow")
	}
	if math.Abs(sum-cp.TotalWeight) > 1e-9*math.Max(sum, cp.TotalWeight) {
		return fmt.Errorf("total weight %g does not match the bucket weights' sum %g", cp.TotalWeight, sum)
	}
	h.weights = weights
	h.total = cp.TotalWeight
	h.ref = cp.ReferenceTime
	h.updateMinMax()
	return nil
}
