package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/qlearn"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// The Knative study's policy and the baselines it is judged against.
const (
	// PolicyQLearn is tabular Q-learning of the HPA-style target CPU
	// utilisation (pkg/rl/qlearn, after Schuler et al.), learning online
	// on each run from scratch, starting from Knative's default target
	// (70%, its container-concurrency-target-percentage).
	PolicyQLearn = qlearn.PolicyName
	// PolicyQLearnRule is qlearn's replica rule, ceil(replicas × CPU
	// utilisation / target) with neither the HPA's tolerance nor its
	// stabilisation, at Knative's default target, learning nothing: the
	// control that tells what the learning adds from what the rule costs.
	PolicyQLearnRule = "qlearn:no-learning"
	// PolicyHPATargetPrefix names the HPA alone at another target CPU
	// utilisation, e.g. hpa:target=0.5.
	PolicyHPATargetPrefix = "hpa:target="
	// PolicyHPABestTarget is the HPA alone at the fixed target of
	// HindsightTargets with the best mean reward on the run, chosen after
	// simulating the run under each: what a per-workload fixed target can
	// do at best, known with hindsight.
	PolicyHPABestTarget = "hpa:best-target"
)

// HindsightTargets are the fixed targets PolicyHPABestTarget chooses
// among: qlearn's levels, so that the learner's best fixed choice is
// among them.
func HindsightTargets() []float64 { return []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9} }

// qlearnPolicy reports whether name is one of this file's policies, and
// builds its contender.
func qlearnPolicy(name string) (eval.Contender, bool, error) {
	switch {
	case name == PolicyQLearn:
		return eval.FromFactory(name, qlearn.NewPolicyFactory(qlearn.Options{})), true, nil
	case name == PolicyQLearnRule:
		// Two levels a unit in the last place apart: the learner may only
		// move between two equal targets, and explores never.
		o := qlearn.Options{Targets: []float64{0.7, math.Nextafter(0.7, 1)}, ExplicitZeroEpsilon: true}
		return eval.FromFactory(name, qlearn.NewPolicyFactory(o)), true, nil
	case name == PolicyHPABestTarget:
		return eval.Contender{Name: name, New: func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
			t, err := BestFixedTarget(context.Background(), r, cfg, HindsightTargets())
			if err != nil {
				return nil, err
			}
			return hpa.NewPolicyFactory(hpa.PolicyOptions{TargetCPUUtilization: t})(r.App.Constraints)
		}}, true, nil
	case strings.HasPrefix(name, PolicyHPATargetPrefix):
		t, err := strconv.ParseFloat(strings.TrimPrefix(name, PolicyHPATargetPrefix), 64)
		if err != nil || !(t > 0 && t <= 1) {
			return eval.Contender{}, true, fmt.Errorf("policy %q: the target must be a number in (0, 1]", name)
		}
		return eval.FromFactory(name, hpa.NewPolicyFactory(hpa.PolicyOptions{TargetCPUUtilization: t})), true, nil
	}
	return eval.Contender{}, false, nil
}

// BestFixedTarget simulates r under the HPA alone at each target and
// returns the one with the highest mean reward (the first among equals).
// The simulator is deterministic for a run's seed, so the HPA at that
// target then repeats the run it was chosen on.
func BestFixedTarget(ctx context.Context, r eval.Run, cfg sim.Config, targets []float64) (float64, error) {
	best, bestR := 0.0, math.Inf(-1)
	for _, t := range targets {
		p, err := hpa.NewPolicyFactory(hpa.PolicyOptions{TargetCPUUtilization: t})(r.App.Constraints)
		if err != nil {
			return 0, err
		}
		s, err := sim.New(cfg, r.App, r.Trace, r.Seed)
		if err != nil {
			return 0, err
		}
		sum := 0.0
		for i := range r.Trace.Rates {
			m := s.Step()
			terms, err := reward.Compute(m.RewardInputs(), reward.Options{})
			if err != nil {
				return 0, fmt.Errorf("target %g, window %d: %w", t, i, err)
			}
			sum += terms.Reward
			// As the evaluator: a policy error or a refused change leaves
			// the workload as it is.
			if rec, err := p.Recommend(ctx, s.Observation()); err == nil {
				_, _ = s.Apply(rec)
			}
		}
		if sum > bestR {
			best, bestR = t, sum
		}
	}
	return best, nil
}

// SettleLog records the target qlearn holds after each window of each run,
// to say how many windows it needs to settle. Safe for concurrent use.
type SettleLog struct {
	mu   sync.Mutex
	runs map[string][]float64
}

// recordSettle wraps qlearn's contender so that its targets go into a new
// log.
func recordSettle(c eval.Contender) (eval.Contender, *SettleLog) {
	l := &SettleLog{runs: map[string][]float64{}}
	inner := c.New
	c.New = func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
		p, err := inner(r, cfg)
		if err != nil {
			return nil, err
		}
		q, ok := p.(*qlearn.Policy)
		if !ok {
			return nil, fmt.Errorf("settle log: %s is not a qlearn policy", p.Name())
		}
		targets := make([]float64, 0, len(r.Trace.Rates))
		key := fmt.Sprintf("%s/%s/%d", r.App.Name, r.Trace.Name, r.Seed)
		return &settleRecorder{Policy: q, done: func(t float64) {
			targets = append(targets, t)
			if len(targets) == len(r.Trace.Rates) {
				l.mu.Lock()
				l.runs[key] = targets
				l.mu.Unlock()
			}
		}}, nil
	}
	return c, l
}

type settleRecorder struct {
	*qlearn.Policy
	done func(target float64)
}

func (s *settleRecorder) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	rec, err := s.Policy.Recommend(ctx, obs)
	s.done(s.Target())
	return rec, err
}

// SettleHour is the block of windows the settling time is counted in.
const SettleHour = 240

// SettleWindow is the window from which a run's targets stay settled: the
// start of the first block of block windows after which every block's
// most frequent target is within one level (0.1) of the last block's. The
// learner explores (ε = 0.1) to the end, so single windows never settle;
// the most frequent target of a block is what it holds. A run shorter
// than two blocks settles at 0.
func SettleWindow(targets []float64, block int) int {
	n := len(targets) / block
	if n < 2 {
		return 0
	}
	modes := make([]float64, n)
	for b := range n {
		modes[b] = mode(targets[b*block : (b+1)*block])
	}
	final := modes[n-1]
	settled := n - 1
	for b := n - 2; b >= 0 && math.Abs(modes[b]-final) <= 0.1+1e-9; b-- {
		settled = b
	}
	return settled * block
}

func mode(xs []float64) float64 {
	count := map[float64]int{}
	best, n := 0.0, 0
	for _, x := range xs {
		count[x]++
		if c := count[x]; c > n || (c == n && x < best) {
			best, n = x, c
		}
	}
	return best
}

// Write prints the distribution of the runs' settling windows and final
// targets.
func (l *SettleLog) Write(w io.Writer, step float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.runs) == 0 {
		return
	}
	var settle, final []float64
	never := 0
	for _, ts := range l.runs {
		w := SettleWindow(ts, SettleHour)
		if n := len(ts) / SettleHour; n >= 2 && w == (n-1)*SettleHour {
			never++ // only the last hour agrees with itself
		}
		settle = append(settle, float64(w))
		final = append(final, mode(ts[max(len(ts)-SettleHour, 0):]))
	}
	slices.Sort(settle)
	slices.Sort(final)
	q := func(xs []float64, p float64) float64 { return xs[int(p*float64(len(xs)-1))] }
	fmt.Fprintf(w, "\n%s settles (hourly modal target within 0.1 of the last hour's from then on) after windows: median %.0f, 75th percentile %.0f, 90th %.0f, max %.0f of %d runs (%.0f s windows); %d never settle (the hour before the last differs); its last hour's target: 10th percentile %.1f, median %.1f, 90th %.1f.\n",
		PolicyQLearn, q(settle, 0.5), q(settle, 0.75), q(settle, 0.9), settle[len(settle)-1], len(settle), step, never,
		q(final, 0.1), q(final, 0.5), q(final, 0.9))
}
