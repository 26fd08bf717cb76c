package soak

import (
	"math"
	"slices"
)

// Segment is the samples of one series between two restarts: those at
// Start ≤ t < End, in time order. The first segment starts at 0 (the
// soak's start) and the last ends at +Inf.
type Segment struct {
	Start, End float64
	Points     []Point
}

// Split splits points, ordered by time, at cuts (the times of the
// restarts, in any order), keeping every point: a point at t belongs to
// the segment that starts at the last cut ≤ t (or at 0). Segments without
// a point are left out.
func Split(points []Point, cuts []float64) []Segment {
	cs := slices.Clone(cuts)
	slices.Sort(cs)
	// bounds[i] is the start of segment i and the end of segment i−1.
	bounds := append(append([]float64{math.Inf(-1)}, cs...), math.Inf(1))
	var out []Segment
	cur := Segment{Start: 0, End: bounds[1]}
	seg := 0
	for _, p := range points {
		next := seg
		for next+2 < len(bounds) && p.T >= bounds[next+1] {
			next++
		}
		if next != seg {
			if len(cur.Points) > 0 {
				out = append(out, cur)
			}
			seg = next
			cur = Segment{Start: bounds[seg], End: bounds[seg+1]}
		}
		cur.Points = append(cur.Points, p)
	}
	if len(cur.Points) > 0 {
		out = append(out, cur)
	}
	return out
}

// minSettled is the fewest samples a segment's settled part must hold for
// its mean to stand for the segment: with one or two, a single GC cycle
// would set the level.
const minSettled = 3

// Settled returns the segment's settled level: the mean time and value of
// its samples in the last fraction of its span, the span ending at End
// or, for the last segment (End = +Inf), at its last sample. n is how many
// samples that is; ok is false when fewer than minSettled.
//
// Why the end of the segment: a process (re)started, or one whose API
// server restarted under it, grows its heap and caches towards a plateau
// over minutes (about 25 in the soak of record). The end of a segment is
// as far from its disturbance as the segment gets. A leak raises every
// segment's end; a climb that ends does not.
func (s Segment) Settled(fraction float64) (level Point, n int, ok bool) {
	if len(s.Points) == 0 {
		return Point{}, 0, false
	}
	end := s.End
	if math.IsInf(end, 1) {
		end = s.Points[len(s.Points)-1].T
	}
	from := end - fraction*(end-s.Start)
	for _, p := range s.Points {
		if p.T >= from && p.T <= end {
			level.T += p.T
			level.V += p.V
			n++
		}
	}
	if n < minSettled {
		return Point{}, n, false
	}
	level.T /= float64(n)
	level.V /= float64(n)
	return level, n, true
}

// SettledLevels is each segment's settled level (Segment.Settled), in
// time order, leaving out the segments with too few settled samples.
func SettledLevels(segs []Segment, fraction float64) []Point {
	var out []Point
	for _, s := range segs {
		if l, _, ok := s.Settled(fraction); ok {
			out = append(out, l)
		}
	}
	return out
}

// CompactionDrop is the fall, as a share of the previous sample, that
// Troughs reads as a compaction of the agent's experience log. A
// compaction cuts the log from about four times the records it keeps to
// those records (rl-agent/server/journal.go), a fall of about three
// quarters (32.4 to 9.2 MiB in the soak of record); between compactions
// the directory only grows, by a record at a time. A quarter is well
// clear of both.
const CompactionDrop = 0.25

// MinTroughs is the fewest compactions whose troughs are fitted: three
// troughs leave one degree of freedom, whose Student-t quantile (12.7)
// makes an interval that excludes next to nothing; four leave two (4.3).
const MinTroughs = 4

// Troughs returns the levels a sawtooth falls back to: after each fall
// of more than drop, both as a share of the sample before it and of the
// series' highest sample, the lowest sample before the series rises
// again. The second share keeps the jitter of a directory of a few
// kilobytes early in the run (a checkpoint rewritten) from counting as
// compactions. The first sample of the run is not a trough even if it is
// the lowest: the directory then is whatever the set-up left, not what a
// compaction keeps.
//
// Why troughs judge the state directory: between compactions it grows by
// design, and the peak is where a compaction is due, which is set by a
// count of records, so neither its slope nor its peaks say whether
// anything is kept that should not be. What a compaction leaves is the
// records it keeps plus everything it fails to remove; a leak in the
// directory (checkpoints of forgotten workloads, temporaries, a log that
// keeps more each time) raises it from one compaction to the next.
func Troughs(points []Point, drop float64) []Point {
	peak := math.Inf(-1)
	for _, p := range points {
		peak = max(peak, p.V)
	}
	var out []Point
	for i := 1; i < len(points); i++ {
		fall := points[i-1].V - points[i].V
		if !(fall > drop*points[i-1].V && fall > drop*peak) {
			continue
		}
		j := i
		for j+1 < len(points) && points[j+1].V <= points[j].V {
			j++
		}
		out = append(out, points[j])
		i = j
	}
	return out
}
