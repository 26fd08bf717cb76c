// Command adaptpair compares one arm of an adapt experiment with an arm of
// another run of it on the same (app, seed) pairs: e.g. Meta-PPO against
// its blind self (`rl-agent evidence --meta-blind`), whose pre-training is
// a run of its own (docs/results/evidence-meta-residual.md). Both runs must hold
// the same seeds and apps.
//
// The converged reward of a pair is the best final reward of every
// learning arm of both runs (the fused floor excluded), so that episodes
// to a fraction of it are counted against one target for both arms. It
// prints the paired difference (arm of -a minus arm of -b) of zero-shot
// reward, final reward, episodes to 90% and 95% of the converged reward
// (a threshold never reached counts as the episodes run), with 95%
// t-intervals over the pairs and with the seed as the unit, and the
// speed-up to 90% (b's mean episodes over a's) with a bootstrap interval.
//
// Usage: go run ./hack/adaptpair -a RUN/adapt.json:ARM -b RUN/adapt.json:ARM
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// smooth and fractions are the adapt experiment's defaults
// (EvidenceOptions.SmoothEpisodes; 90% and AdaptThresholds' 95%).
const smooth = 3

var fractions = []float64{0.9, 0.95}

func main() {
	a := flag.String("a", "", "FILE:ARM, the arm compared (an adapt.json of `rl-agent evidence --experiment=adapt` and one of its arms)")
	b := flag.String("b", "", "FILE:ARM, the base it is compared with")
	flag.Parse()
	if err := run(os.Stdout, *a, *b); err != nil {
		fmt.Fprintln(os.Stderr, "adaptpair:", err)
		os.Exit(1)
	}
}

// side is one arm of one run.
type side struct {
	file, arm string
	study     *train.AdaptStudy
}

func load(spec string) (side, error) {
	i := strings.LastIndex(spec, ":")
	if i <= 0 || i == len(spec)-1 {
		return side{}, fmt.Errorf("want FILE:ARM, got %q", spec)
	}
	s := side{file: spec[:i], arm: spec[i+1:]}
	data, err := os.ReadFile(s.file)
	if err != nil {
		return side{}, err
	}
	s.study = &train.AdaptStudy{}
	if err := json.Unmarshal(data, s.study); err != nil {
		return side{}, fmt.Errorf("%s: %w", s.file, err)
	}
	if len(s.study.PerSeed) == 0 || len(s.study.PerSeed) != len(s.study.Seeds) {
		return side{}, fmt.Errorf("%s: %d seeds and %d per-seed results", s.file, len(s.study.Seeds), len(s.study.PerSeed))
	}
	return s, nil
}

// pair is one (seed, app) of both sides.
type pair struct {
	seed       uint64
	a, b       train.AdaptRun
	aTo, bTo   []float64
	aHit, bHit []bool
}

func run(w io.Writer, specA, specB string) error {
	if specA == "" || specB == "" {
		return errors.New("-a and -b are required")
	}
	a, err := load(specA)
	if err != nil {
		return err
	}
	b, err := load(specB)
	if err != nil {
		return err
	}
	if !slices.Equal(a.study.Seeds, b.study.Seeds) {
		return fmt.Errorf("the runs hold seeds %v and %v", a.study.Seeds, b.study.Seeds)
	}
	var ps []pair
	for k, seed := range a.study.Seeds {
		ra, rb := a.study.PerSeed[k], b.study.PerSeed[k]
		for _, x := range ra.Runs {
			if x.Arm != a.arm {
				continue
			}
			y, ok := find(rb.Runs, b.arm, x.App)
			if !ok {
				return fmt.Errorf("seed %d: %s has no %s run on %s", seed, b.file, b.arm, x.App)
			}
			conv := math.Inf(-1)
			for _, r := range append(slices.Clone(ra.Runs), rb.Runs...) {
				if r.App == x.App && r.Arm != train.ArmFused {
					conv = math.Max(conv, r.Final)
				}
			}
			p := pair{seed: seed, a: x, b: y}
			for _, f := range fractions {
				target := conv - (1-f)*math.Abs(conv)
				n, hit := train.EpisodesTo(x.Rewards, target, smooth)
				p.aTo, p.aHit = append(p.aTo, float64(n)), append(p.aHit, hit)
				n, hit = train.EpisodesTo(y.Rewards, target, smooth)
				p.bTo, p.bHit = append(p.bTo, float64(n)), append(p.bHit, hit)
			}
			ps = append(ps, p)
		}
	}
	if len(ps) < 2 {
		return fmt.Errorf("%d (app, seed) pairs of %s in %s: want at least 2", len(ps), a.arm, a.file)
	}
	fmt.Fprintf(w, "%s:%s minus %s:%s over %d (app, seed) pairs, seeds %v; mean [95%% CI]; the converged reward of a pair is the best final of every learning arm of both runs.\n",
		a.file, a.arm, b.file, b.arm, len(ps), a.study.Seeds)
	measures := []struct {
		name string
		get  func(p pair) (float64, float64)
	}{
		{"zero-shot reward", func(p pair) (float64, float64) { return p.a.ZeroShot, p.b.ZeroShot }},
		{"final reward", func(p pair) (float64, float64) { return p.a.Final, p.b.Final }},
		{"episodes to 90%", func(p pair) (float64, float64) { return p.aTo[0], p.bTo[0] }},
		{"episodes to 95%", func(p pair) (float64, float64) { return p.aTo[1], p.bTo[1] }},
	}
	for _, m := range measures {
		var xs, ys []float64
		for _, p := range ps {
			x, y := m.get(p)
			xs, ys = append(xs, x), append(ys, y)
		}
		d, err := stats.Paired(xs, ys, 0.95)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		unit, err := seedUnit(ps, a.study.Seeds, m.get)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		fmt.Fprintf(w, "  %-17s %.3f vs %.3f: %+.3f [%+.3f, %+.3f]; seed as the unit [%+.3f, %+.3f]\n",
			m.name, mean(xs), mean(ys), d.Mean, d.Lo, d.Hi, unit.Lo, unit.Hi)
	}
	var num, den []float64
	reachedA, reachedB := 0, 0
	for _, p := range ps {
		num, den = append(num, p.bTo[0]), append(den, p.aTo[0])
		if p.aHit[0] {
			reachedA++
		}
		if p.bHit[0] {
			reachedB++
		}
	}
	sp, err := stats.RatioOfMeans(num, den, 0.95, 2000, 1)
	if err != nil {
		return fmt.Errorf("speed-up: %w", err)
	}
	fmt.Fprintf(w, "  speed-up to 90%%   %.2fx [%.2fx, %.2fx] (-b's mean episodes over -a's); reached by %d (-a) and %d (-b) of %d\n",
		sp.Mean, sp.Lo, sp.Hi, reachedA, reachedB, len(ps))
	return nil
}

// seedUnit is the t-interval of the per-seed mean differences.
func seedUnit(ps []pair, seeds []uint64, get func(pair) (float64, float64)) (stats.Interval, error) {
	ds, seedOf := make([]float64, len(ps)), make([]int, len(ps))
	seen := make([]bool, len(seeds))
	for i, p := range ps {
		x, y := get(p)
		k := slices.Index(seeds, p.seed)
		ds[i], seedOf[i], seen[k] = x-y, k, true
	}
	if k := slices.Index(seen, false); k >= 0 {
		return stats.Interval{}, fmt.Errorf("seed %d has no pair", seeds[k])
	}
	return stats.Mean(train.SeedMeans(ds, seedOf, len(seeds)), 0.95)
}

func find(runs []train.AdaptRun, arm, app string) (train.AdaptRun, bool) {
	for _, r := range runs {
		if r.Arm == arm && r.App == app {
			return r, true
		}
	}
	return train.AdaptRun{}, false
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
