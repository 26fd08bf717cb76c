// The meta-learning comparison is single-goroutine numerical code (nothing
// for the race detector to find) and runs ~5 s normally but several minutes
// under -race, where Gorgonia's graph runs slow down more than 20-fold; it is
// therefore built without the race detector only. Concurrency of MetaPPO is
// covered by the race-enabled tests in meta_test.go.

//go:build !race

package nn

import (
	"math/rand/v2"
	"testing"
)

// A family of bandit tasks whose identity is visible only through past
// rewards. Every task has the same observable state (a constant and the
// position within the episode). Task (good, other) pays 1 for its good action
// and `other` (in [0, 0.6]) for every other action, so neither the state nor
// one non-good reward says which action is good. Held-out tasks draw a fresh
// `other`, so they are tasks never seen in meta-training.
const (
	banditTaskActions = 4
	banditEpisodeLen  = 8
)

type banditTask struct {
	good  int
	other float64
}

func (k banditTask) reward(a int) float64 {
	if a == k.good {
		return 1
	}
	return k.other
}

func banditTaskState(step int) []float64 {
	return []float64{1, float64(step) / banditEpisodeLen}
}

// splitBanditTasks draws two training tasks per good action and one
// held-out task for each of two good actions.
func splitBanditTasks() (train, heldOut []banditTask) {
	rng := newRNG(2024)
	for g := range banditTaskActions {
		for range 2 {
			train = append(train, banditTask{g, rng.Float64() * 0.6})
		}
	}
	for _, g := range []int{1, 2} {
		heldOut = append(heldOut, banditTask{g, rng.Float64() * 0.6})
	}
	return train, heldOut
}

// episodeLearner abstracts over MetaPPO and PPO for the comparison: act in
// step t of an episode given the steps so far, and learn from episodes.
type episodeLearner interface {
	act(step int, window []Step, rng *rand.Rand) (int, error)
	update(episodes [][]Step) error
}

type metaLearner struct{ m *MetaPPO }

func (l metaLearner) act(step int, window []Step, rng *rand.Rand) (int, error) {
	d, err := l.m.ActWindow(banditTaskState(step), window, nil, false, rng)
	return d.Action, err
}

func (l metaLearner) update(episodes [][]Step) error {
	var batch []MetaTransition
	for _, ep := range episodes {
		for t, st := range ep {
			tr := MetaTransition{Transition: Transition{State: st.State, Action: st.Action, Reward: st.Reward}, Window: ep[:t]}
			if t == len(ep)-1 {
				tr.Done = true
			} else {
				tr.NextState = ep[t+1].State
			}
			batch = append(batch, tr)
		}
	}
	_, err := l.m.Update(batch)
	return err
}

type plainLearner struct{ p *PPO }

func (l plainLearner) act(step int, _ []Step, rng *rand.Rand) (int, error) {
	d, err := l.p.Act(banditTaskState(step), nil, false, rng)
	return d.Action, err
}

func (l plainLearner) update(episodes [][]Step) error {
	var batch []Transition
	for _, ep := range episodes {
		for t, st := range ep {
			tr := Transition{State: st.State, Action: st.Action, Reward: st.Reward}
			if t == len(ep)-1 {
				tr.Done = true
			} else {
				tr.NextState = ep[t+1].State
			}
			batch = append(batch, tr)
		}
	}
	_, err := l.p.Update(batch)
	return err
}

// runEpisodes plays n episodes, each on a task drawn from tasks, and returns
// them with the fraction of steps that chose the task's good action (the
// rewards of the other actions differ between tasks, so this is the
// comparable figure).
func runEpisodes(t testing.TB, l episodeLearner, tasks []banditTask, n int, rng *rand.Rand) ([][]Step, float64) {
	t.Helper()
	good := 0
	eps := make([][]Step, n)
	for i := range eps {
		k := tasks[rng.IntN(len(tasks))]
		ep := make([]Step, 0, banditEpisodeLen)
		for step := range banditEpisodeLen {
			a, err := l.act(step, ep, rng)
			if err != nil {
				t.Fatal(err)
			}
			if a == k.good {
				good++
			}
			ep = append(ep, Step{State: banditTaskState(step), Action: a, Reward: k.reward(a)})
		}
		eps[i] = ep
	}
	return eps, float64(good) / float64(n*banditEpisodeLen)
}

func banditMetaConfig(seed uint64) MetaConfig {
	cfg := MetaConfig{Config: DefaultConfig(2, banditTaskActions), Window: banditEpisodeLen - 1, EmbedDim: 8}
	cfg.Hidden = []int{32}
	// A high learning rate and a strong entropy bonus: with the default
	// 3e-3 and 0.01, policies trained on the mixture collapse onto a
	// favourite action before the encoder has learnt to read rewards.
	cfg.LearningRate = 1e-2
	cfg.EntropyCoef = 0.05
	cfg.Gamma = 0.9
	cfg.MinibatchSize = 64
	cfg.Seed = seed
	return cfg
}

// Budget of the comparison. The race detector does not change the
// arithmetic, so both builds compute the same numbers.
const (
	metaTrainUpdates  = 60
	episodesPerUpdate = 32
	adaptMaxUpdates   = 30
	adaptThreshold    = 0.7 // fraction of steps choosing the good action
)

// updatesToThreshold plays batches of episodes on task k and updates on each
// batch, and returns how many updates were taken before a batch reached the
// threshold (0: the first batch already did), or -1 if none did.
func updatesToThreshold(t *testing.T, l episodeLearner, k banditTask, rng *rand.Rand) (int, []float64) {
	t.Helper()
	var curve []float64
	for u := 0; u <= adaptMaxUpdates; u++ {
		eps, rate := runEpisodes(t, l, []banditTask{k}, episodesPerUpdate, rng)
		curve = append(curve, rate)
		if rate >= adaptThreshold {
			return u, curve
		}
		if err := l.update(eps); err != nil {
			t.Fatal(err)
		}
	}
	return -1, curve
}

// TestMetaPPOAdaptsFasterThanPPO: meta-PPO and a PPO without the embedding
// ("transfer": the same architecture minus the encoder, trained on the same
// tasks) are trained on the training tasks for the same number of updates;
// then each, and a PPO from scratch, keeps learning online on each held-out
// task. Meta-PPO must reach the threshold in fewer updates than both.
func TestMetaPPOAdaptsFasterThanPPO(t *testing.T) {
	train, heldOut := splitBanditTasks()
	const seed = 1
	trainUpdates := metaTrainUpdates
	meta, err := NewMetaPPO(banditMetaConfig(seed))
	if err != nil {
		t.Fatal(err)
	}
	transfer := mustPPO(t, banditMetaConfig(seed).Config)
	rng := newRNG(seed)
	var metaRate, transferRate float64
	for range trainUpdates {
		var eps [][]Step
		eps, metaRate = runEpisodes(t, metaLearner{meta}, train, episodesPerUpdate, rng)
		if err := (metaLearner{meta}).update(eps); err != nil {
			t.Fatal(err)
		}
		eps, transferRate = runEpisodes(t, plainLearner{transfer}, train, episodesPerUpdate, rng)
		if err := (plainLearner{transfer}).update(eps); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("after %d training updates: good-action rate on training tasks: meta %.3f, transfer %.3f", trainUpdates, metaRate, transferRate)
	metaCk, transferCk := mustMarshalMeta(t, meta), mustMarshal(t, transfer)

	for i, k := range heldOut {
		// Every learner adapts from the same starting point on every task.
		m, err := NewMetaPPOFromCheckpoint(metaCk)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := NewPPOFromCheckpoint(transferCk)
		if err != nil {
			t.Fatal(err)
		}
		scratch := mustPPO(t, banditMetaConfig(seed+uint64(i)+1).Config)
		nMeta, cMeta := updatesToThreshold(t, metaLearner{m}, k, newRNG(100+uint64(i)))
		nTr, cTr := updatesToThreshold(t, plainLearner{tr}, k, newRNG(100+uint64(i)))
		nScr, cScr := updatesToThreshold(t, plainLearner{scratch}, k, newRNG(100+uint64(i)))
		t.Logf("held-out task %+v: updates to %.0f%% good actions: meta %d, transfer %d, scratch %d", k, 100*adaptThreshold, nMeta, nTr, nScr)
		t.Logf("  first rates: meta %.2f, transfer %.2f, scratch %.2f", cMeta[0], cTr[0], cScr[0])
		if nMeta < 0 {
			t.Errorf("task %+v: meta-PPO did not reach %.2f within %d updates (rates %.2f)", k, adaptThreshold, adaptMaxUpdates, cMeta)
			continue
		}
		for _, o := range []struct {
			name string
			n    int
		}{{"transfer", nTr}, {"scratch", nScr}} {
			if o.n >= 0 && o.n <= nMeta {
				t.Errorf("task %+v: %s PPO reached the threshold in %d updates, meta-PPO in %d", k, o.name, o.n, nMeta)
			}
		}
	}
}
