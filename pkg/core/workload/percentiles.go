package workload

// Percentiles is a set of Latency's percentiles.
type Percentiles uint8

const (
	PercentileP50 Percentiles = 1 << iota
	PercentileP95
	PercentileP99

	// NoPercentiles is the empty set; AllPercentiles is Latency's three.
	NoPercentiles  Percentiles = 0
	AllPercentiles             = PercentileP50 | PercentileP95 | PercentileP99
)

// Has reports whether s holds every percentile of p.
func (s Percentiles) Has(p Percentiles) bool { return s&p == p }

// Keep returns l with the percentiles outside s set to 0.
func (s Percentiles) Keep(l Latency) Latency {
	if !s.Has(PercentileP50) {
		l.P50 = 0
	}
	if !s.Has(PercentileP95) {
		l.P95 = 0
	}
	if !s.Has(PercentileP99) {
		l.P99 = 0
	}
	return l
}

// LatencyReader is a Policy that declares which of Observation.Latency's
// percentiles it reads, so that a simulator replaying it computes only
// those: with a rate window each observation's percentiles are quantiles
// of pooled windows, most of a replay's CPU (pkg/lab/sim, Config.Unread).
//
// Invariant: ReadsLatency covers every percentile Recommend reads,
// directly or through the policies it delegates to; the others reach it
// as 0. The what-if's tests replay each of its policies given only what
// it declares and given everything, and require the same decisions.
type LatencyReader interface {
	ReadsLatency() Percentiles
}

// ReadsLatency returns the percentiles p reads: its declaration when it
// is a LatencyReader, else all three. A policy that does not declare, or a
// wrapper that does not pass on what it wraps declares, is so given every
// percentile: reading less is always something a policy states.
func ReadsLatency(p Policy) Percentiles {
	if r, ok := p.(LatencyReader); ok {
		return r.ReadsLatency() & AllPercentiles
	}
	return AllPercentiles
}

// Unread returns the percentiles p does not read (ReadsLatency's
// complement): what a simulator of p may leave uncomputed
// (pkg/lab/sim, Config.Unread).
func Unread(p Policy) Percentiles {
	return AllPercentiles &^ ReadsLatency(p)
}
