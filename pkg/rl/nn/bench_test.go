package nn

import (
	"testing"
)

// benchConfig is the production default architecture on an AWARE-sized
// problem: a dozen state features, seven actions.
func benchConfig() Config { return DefaultConfig(12, 7) }

func BenchmarkAct(b *testing.B) {
	p := mustPPO(b, benchConfig())
	rng := newRNG(1)
	s := randomState(rng, 12)
	mask := []bool{true, true, false, true, true, true, false}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Act(s, mask, false, rng); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkActBatch64(b *testing.B) {
	p := mustPPO(b, benchConfig())
	rng := newRNG(1)
	states := make([][]float64, 64)
	for i := range states {
		states[i] = randomState(rng, 12)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ActBatch(states, nil, false, rng); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(states))/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkUpdate measures one Update on 1024 transitions with the default
// 4 epochs of 64-sample minibatches (64 gradient steps).
func BenchmarkUpdate(b *testing.B) {
	p := mustPPO(b, benchConfig())
	batch := randomBatch(newRNG(1), 1024, 12, 7)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Update(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch)*p.cfg.Epochs)/b.Elapsed().Seconds(), "samples/s")
}

func BenchmarkBehaviourClone(b *testing.B) {
	p := mustPPO(b, benchConfig())
	rng := newRNG(1)
	demos := make([]Demonstration, 1024)
	for i := range demos {
		demos[i] = Demonstration{State: randomState(rng, 12), Action: rng.IntN(7)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.BehaviourClone(demos); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDDPGUpdate measures one DDPG step (critic, actor, soft update) on
// a 64-sample minibatch.
func BenchmarkDDPGUpdate(b *testing.B) {
	d, err := NewDDPG(DefaultDDPGConfig(12, 2))
	if err != nil {
		b.Fatal(err)
	}
	batch := randomContinuousBatch(newRNG(1), 64, 12, 2)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Update(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// benchMetaConfig is the production default meta architecture on an
// AWARE-sized problem: 16-step windows, 8-dimensional embeddings.
func benchMetaConfig() MetaConfig { return DefaultMetaConfig(12, 7) }

func benchWindows(n int) [][]Step {
	rng := newRNG(1)
	ws := make([][]Step, n)
	for i := range ws {
		ws[i] = randomWindow(rng, 16, 12, 7)
	}
	return ws
}

// BenchmarkMetaEmbed is the GRU embedding cost of one full window.
func BenchmarkMetaEmbed(b *testing.B) {
	m := mustMeta(b, benchMetaConfig())
	w := benchWindows(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Embed(w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaEmbedBatch64(b *testing.B) {
	m := mustMeta(b, benchMetaConfig())
	ws := benchWindows(64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.EmbedBatch(ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ws))/b.Elapsed().Seconds(), "windows/s")
}

// BenchmarkMetaActWindow is one decision including its embedding.
func BenchmarkMetaActWindow(b *testing.B) {
	m := mustMeta(b, benchMetaConfig())
	w := benchWindows(1)[0]
	rng := newRNG(1)
	s := randomState(rng, 12)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.ActWindow(s, w, nil, false, rng); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMetaUpdate is BenchmarkUpdate with 16-step windows: the GRU is
// unrolled 16 steps in every graph run.
func BenchmarkMetaUpdate(b *testing.B) {
	cfg := benchMetaConfig()
	m := mustMeta(b, cfg)
	plain := randomBatch(newRNG(1), 1024, 12, 7)
	ws := benchWindows(len(plain))
	batch := make([]MetaTransition, len(plain))
	for i := range batch {
		batch[i] = MetaTransition{Transition: plain[i], Window: ws[i]}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Update(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch)*cfg.Epochs)/b.Elapsed().Seconds(), "samples/s")
}
