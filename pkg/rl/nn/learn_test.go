package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// banditState is a one-hot context of 4 plus a distractor feature.
func banditState(rng *rand.Rand) ([]float64, int) {
	c := rng.IntN(4)
	s := make([]float64, 5)
	s[c] = 1
	s[4] = rng.Float64()*2 - 1
	return s, c
}

// banditMask leaves action 4 always illegal: it would be a tempting
// distraction otherwise, since it pays best of all.
var banditMask = []bool{true, true, true, true, false}

func banditReward(c, a int) float64 {
	switch {
	case a == 4:
		return 10 // never reachable while masked
	case a == c:
		return 1
	default:
		return 0
	}
}

// TestPPOLearnsContextualBandit: the right action is the context; one step
// per episode. A uniform policy is right 25% of the time.
func TestPPOLearnsContextualBandit(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cfg := DefaultConfig(5, 5)
			cfg.Hidden = []int{32}
			cfg.LearningRate = 3e-3
			cfg.Seed = seed
			p := mustPPO(t, cfg)
			rng := newRNG(seed)
			const maxUpdates = 40
			solved := -1
			for u := 0; u < maxUpdates && solved < 0; u++ {
				batch := make([]Transition, 256)
				for i := range batch {
					s, c := banditState(rng)
					d, err := p.Act(s, banditMask, false, rng)
					if err != nil {
						t.Fatal(err)
					}
					if d.Action == 4 {
						t.Fatal("masked action sampled during training")
					}
					batch[i] = Transition{State: s, Mask: banditMask, Action: d.Action, Reward: banditReward(c, d.Action), Done: true}
				}
				if _, err := p.Update(batch); err != nil {
					t.Fatal(err)
				}
				if banditOptimalRate(t, p, rng, 400) > 0.9 {
					solved = u + 1
				}
			}
			if solved < 0 {
				t.Fatalf("not solved within %d updates; optimal rate %.3f", maxUpdates, banditOptimalRate(t, p, rng, 400))
			}
			t.Logf("seed %d: >90%% optimal after %d updates", seed, solved)
		})
	}
}

// banditOptimalRate samples (not greedy) on fresh contexts.
func banditOptimalRate(t *testing.T, p *PPO, rng *rand.Rand, n int) float64 {
	t.Helper()
	ok := 0
	for range n {
		s, c := banditState(rng)
		d, err := p.Act(s, banditMask, false, rng)
		if err != nil {
			t.Fatal(err)
		}
		if d.Action == c {
			ok++
		}
	}
	return float64(ok) / float64(n)
}

// corridor: positions 0..corridorLen-1, start at 0, goal at the right end
// (+1, terminal), -0.02 per other step, time limit corridorLimit (truncated).
// Actions: 0 left (illegal at 0), 1 stay, 2 right. Solving it needs credit
// assignment over several steps, i.e. GAE with bootstrapping.
const (
	corridorLen   = 6
	corridorLimit = 20
)

func corridorState(pos int) []float64 {
	s := make([]float64, corridorLen)
	s[pos] = 1
	return s
}

func corridorMask(pos int) []bool { return []bool{pos > 0, true, true} }

func TestPPOLearnsCorridor(t *testing.T) {
	cfg := DefaultConfig(corridorLen, 3)
	cfg.Hidden = []int{32}
	cfg.LearningRate = 3e-3
	cfg.Gamma = 0.95
	cfg.Seed = 7
	p := mustPPO(t, cfg)
	rng := newRNG(7)
	const maxUpdates = 40
	pos, steps := 0, 0
	for u := 0; u < maxUpdates; u++ {
		batch := make([]Transition, 256)
		for i := range batch {
			d, err := p.Act(corridorState(pos), corridorMask(pos), false, rng)
			if err != nil {
				t.Fatal(err)
			}
			next := pos + d.Action - 1
			steps++
			tr := Transition{State: corridorState(pos), Mask: corridorMask(pos), Action: d.Action, Reward: -0.02}
			if next == corridorLen-1 {
				tr.Reward, tr.Done = 1, true
			} else {
				tr.NextState = corridorState(next)
				tr.Truncated = steps == corridorLimit
			}
			batch[i] = tr
			pos = next
			if tr.Done || tr.Truncated {
				pos, steps = 0, 0
			}
		}
		if _, err := p.Update(batch); err != nil {
			t.Fatal(err)
		}
		if corridorSolved(t, p) {
			t.Logf("solved after %d updates", u+1)
			return
		}
	}
	t.Fatalf("corridor not solved within %d updates", maxUpdates)
}

// corridorSolved: from every non-goal position the policy moves right with
// probability > 0.9.
func corridorSolved(t *testing.T, p *PPO) bool {
	t.Helper()
	for pos := 0; pos < corridorLen-1; pos++ {
		d, err := p.Act(corridorState(pos), corridorMask(pos), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Probs[2] <= 0.9 {
			return false
		}
	}
	return true
}

// scalingTeacher is a threshold rule like the default horizontal controller:
// state is (utilisation, normalised replicas); actions 0 no-op, 1 scale out,
// 2 scale in; scaling out is illegal at the maximum, in at the minimum.
func scalingTeacher(rng *rand.Rand) Demonstration {
	util := rng.Float64() * 1.2
	replicas := rng.IntN(10) // 0 = min, 9 = max
	s := []float64{util, float64(replicas) / 9}
	mask := []bool{true, replicas < 9, replicas > 0}
	a := 0
	switch {
	case util > 0.8 && mask[1]:
		a = 1
	case util < 0.3 && mask[2]:
		a = 2
	}
	return Demonstration{State: s, Mask: mask, Action: a}
}

func TestBehaviourCloningMatchesTeacher(t *testing.T) {
	cfg := DefaultConfig(2, 3)
	cfg.Hidden = []int{32, 32}
	cfg.LearningRate = 3e-3
	cfg.Seed = 3
	p := mustPPO(t, cfg)
	rng := newRNG(3)
	train := make([]Demonstration, 2048)
	for i := range train {
		train[i] = scalingTeacher(rng)
	}
	heldOut := make([]Demonstration, 1000)
	for i := range heldOut {
		heldOut[i] = scalingTeacher(rng)
	}
	agreement := func() float64 {
		ok := 0
		for _, d := range heldOut {
			got, err := p.Act(d.State, d.Mask, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Action == d.Action {
				ok++
			}
		}
		return float64(ok) / float64(len(heldOut))
	}
	start := agreement()
	const maxCalls = 30
	for call := 1; call <= maxCalls; call++ {
		if _, err := p.BehaviourClone(train); err != nil {
			t.Fatal(err)
		}
		if a := agreement(); a > 0.95 {
			t.Logf("held-out agreement %.3f (from %.3f) after %d calls", a, start, call)
			return
		}
	}
	t.Fatalf("held-out agreement %.3f after %d calls, want > 0.95", agreement(), maxCalls)
}
