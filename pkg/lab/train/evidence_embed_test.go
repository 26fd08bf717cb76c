package train

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

func TestHiddenParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		app  sim.App
		want []float64
	}{
		{name: "half the time waiting", app: sim.App{StartupDelay: 20 * time.Second, Demand: sim.Demand{CPUSeconds: 0.1, IOWait: 0.1, MemoryPerRequest: math.E}}, want: []float64{math.Log(0.1), 1, 20, 0.5}},
		{name: "no I/O, no memory per request", app: sim.App{StartupDelay: time.Second / 2, Demand: sim.Demand{CPUSeconds: 1}}, want: []float64{0, 0, 0.5, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HiddenParams(tc.app)
			for k := range tc.want {
				if !near(got[k], tc.want[k]) {
					t.Fatalf("HiddenParams = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// embeddedApps returns apps whose only varying parameter is the start-up
// delay p[i], embedded as the unit vector at angle angle(p[i]).
func embeddedApps(p []float64, angle func(float64) float64) []EmbeddedApp {
	apps := make([]EmbeddedApp, len(p))
	for i, x := range p {
		a := angle(x)
		apps[i] = EmbeddedApp{App: string(rune('a' + i)), Class: sim.ClassCPU, Params: []float64{0, 0, x, 0}, Embedding: []float64{math.Cos(a), math.Sin(a)}, MeanState: []float64{1, x}}
	}
	return apps
}

func TestEmbeddingMeasure(t *testing.T) {
	p := []float64{5, 9, 12, 20, 26, 31, 40}
	for _, tc := range []struct {
		name    string
		apps    []EmbeddedApp
		rho     float64 // NaN: only checked to be below 0.5
		wantErr string
	}{
		// The cosine of two angles falls with their difference, which
		// grows with the parameters' distance: the same ranking.
		{name: "angle proportional to the parameter", apps: embeddedApps(p, func(x float64) float64 { return x / 40 * math.Pi / 2 }), rho: 1},
		{name: "angle unrelated to the parameter", apps: embeddedApps(p, func(x float64) float64 { return math.Mod(x*7.3, 1.6) }), rho: math.NaN()},
		{name: "an app embeds to zeros", apps: append(embeddedApps(p[:3], func(x float64) float64 { return x }), EmbeddedApp{Params: []float64{0, 0, 1, 0}, Embedding: []float64{0, 0}}), wantErr: "embeds to zeros"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &EmbeddingResult{Seed: 1, Apps: tc.apps}
			err := r.measure()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(tc.rho) {
				if r.Rho.Mean > 0.5 {
					t.Errorf("rho %v for an unrelated embedding", r.Rho.Mean)
				}
			} else if !near(r.Rho.Mean, tc.rho) || !near(r.ParamRho[2], tc.rho) {
				t.Errorf("rho %v (start-up alone %v), want %v", r.Rho.Mean, r.ParamRho[2], tc.rho)
			}
			// The other parameters have no spread: they rank nothing.
			if !math.IsNaN(r.ParamRho[0]) || len(r.Explained) != 2 || len(r.Apps[0].PC) != 2 {
				t.Errorf("param rho %v, explained %v, PC %v", r.ParamRho, r.Explained, r.Apps[0].PC)
			}
		})
	}
}

// circles parses an SVG (failing unless it is well-formed) and counts its
// circles.
func circles(t *testing.T, svg []byte) int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	n := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("SVG not well-formed: %v", err)
		}
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "circle" {
			n++
		}
	}
}

func TestRunEmbedding(t *testing.T) {
	e := tinyEvidence()
	e.Apps = 4
	pre := mustPretrain(t, e)
	res, err := RunEmbedding(context.Background(), e, pre)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Apps) != e.Apps {
		t.Fatalf("%d apps, want %d", len(res.Apps), e.Apps)
	}
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range res.Apps {
		// Windows of Window steps exist from the Window+1-th decision on.
		if a.App != apps[i].Name || a.Class != apps[i].DominantClass() || len(a.Embedding) != e.Base.EmbedDim || a.Windows != e.Base.EpisodeSteps-e.Base.Window {
			t.Errorf("app %d: %+v", i, a)
		}
	}
	if res.Rho.Lo > res.Rho.Mean || res.Rho.Hi < res.Rho.Mean || len(res.ParamRho) != len(HiddenParamNames) {
		t.Errorf("rho %+v, per parameter %v", res.Rho, res.ParamRho)
	}
	again, err := RunEmbedding(context.Background(), e, pre)
	if err != nil || !bytes.Equal(mustJSON(t, res), mustJSON(t, again)) {
		t.Errorf("a second run differs (err %v)", err)
	}
	var svg bytes.Buffer
	if err := res.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if n := circles(t, svg.Bytes()); n != len(res.Apps) {
		t.Errorf("%d points in the plot, want one per app (%d)", n, len(res.Apps))
	}
	if _, err := RunEmbedding(context.Background(), e, &Pretrained{PPO: pre.PPO, Meta: pre.PPO}); err == nil || !strings.Contains(err.Error(), "no embedding") {
		t.Errorf("a PPO learner: error %v, want no embedding", err)
	}

	t.Run("study", func(t *testing.T) {
		e2 := e
		e2.Seed = 2
		res2, err := RunEmbedding(context.Background(), e2, pre)
		if err != nil {
			t.Fatal(err)
		}
		st, err := StudyEmbedding([]*EmbeddingResult{res, res2}, []uint64{1, 2})
		if err != nil {
			t.Fatal(err)
		}
		if st.Rho.N != 2*e.Apps || !near(st.Rho.Mean, (res.Rho.Mean+res2.Rho.Mean)/2) || st.SeedRho == nil || !near(st.SeedRho.Mean, st.Rho.Mean) {
			t.Errorf("study rho %+v, seed rho %+v; per seed %v and %v", st.Rho, st.SeedRho, res.Rho.Mean, res2.Rho.Mean)
		}
		var b bytes.Buffer
		if err := st.WriteTable(&b); err != nil || !strings.Contains(b.String(), "Goal: rho >= 0.6") {
			t.Errorf("table (err %v):\n%s", err, b.String())
		}
		if _, err := StudyEmbedding([]*EmbeddingResult{res}, []uint64{1, 2}); err == nil {
			t.Error("one result for two seeds: no error")
		}
	})
}

func TestAuxTarget(t *testing.T) {
	apps, err := sim.GenerateApps(1, 200)
	if err != nil {
		t.Fatal(err)
	}
	// Scaled, the generated apps' parameters lie within [-2.5, 2.5], each
	// with a mean magnitude below 1: none dominates the auxiliary loss.
	mag := make([]float64, len(HiddenParamNames))
	for _, a := range apps {
		for k, v := range AuxTarget(a) {
			mag[k] += math.Abs(v) / float64(len(apps))
			if math.Abs(v) > 2.5 {
				t.Errorf("%s: %s scaled to %.2f (params %v)", a.Name, HiddenParamNames[k], v, HiddenParams(a))
			}
		}
	}
	for k, m := range mag {
		if m > 1 || m < 0.2 {
			t.Errorf("%s: mean magnitude %.2f once scaled, want in [0.2, 1]", HiddenParamNames[k], m)
		}
	}
}

// TestPretrainAuxWeight: the auxiliary weight gives the pre-trained
// Meta-PPO a head and changes its training; the PPO, which has no
// embedding, is the same as without it; and no run on the evidence apps
// trains the head (their parameters are unknown): adapting works from a
// checkpoint with a head.
func TestPretrainAuxWeight(t *testing.T) {
	e := tinyEvidence()
	plain := mustPretrain(t, e)
	e.Base.AuxWeight = 1
	aux := mustPretrain(t, e)
	if !bytes.Equal(marshal(t, plain.PPO), marshal(t, aux.PPO)) {
		t.Error("the auxiliary weight changed the PPO's pre-training")
	}
	m, err := nn.NewMetaPPOFromCheckpoint(marshal(t, aux.Meta))
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config(); c.AuxDim != len(HiddenParamNames) || c.AuxWeight != 1 {
		t.Errorf("pre-trained Meta-PPO config %+v, want an auxiliary head of %d with weight 1", c, len(HiddenParamNames))
	}
	if pm, err := nn.NewMetaPPOFromCheckpoint(marshal(t, plain.Meta)); err != nil || pm.Config().AuxDim != 0 {
		t.Errorf("without the weight: %v, config %+v", err, pm.Config())
	}
	if _, err := RunAdapt(context.Background(), e, aux); err != nil {
		t.Fatal(err)
	}
	e.Apps = 4
	for _, tc := range []struct {
		name string
		pre  *Pretrained
		head bool
	}{{"with a head", aux, true}, {"without", plain, false}} {
		res, err := RunEmbedding(context.Background(), e, tc.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(res.AuxRho) == len(HiddenParamNames) && len(res.Apps[0].Predicted) == len(HiddenParamNames); got != tc.head || (!tc.head && res.AuxRho != nil) {
			t.Errorf("%s: auxiliary rho %v, predictions %v", tc.name, res.AuxRho, res.Apps[0].Predicted)
		}
	}

	t.Run("episodes carry the target only for Meta-PPO with a weight", func(t *testing.T) {
		apps, err := EvidenceApps(1, 1)
		if err != nil {
			t.Fatal(err)
		}
		cfg := sim.DefaultConfig()
		cfg.Step = e.Base.Step
		for _, tc := range []struct {
			name   string
			l      Learner
			weight float64
			want   bool
		}{
			{name: "meta-ppo with a weight", l: aux.Meta, weight: 1, want: true},
			{name: "meta-ppo without", l: aux.Meta, weight: 0},
			{name: "ppo with a weight", l: plain.PPO, weight: 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				o := e.Base
				o.AuxWeight = tc.weight
				ro := runEpisode(context.Background(), tc.l, spec{stage: lifecycle.OnlineTraining, app: apps[0], kind: sim.Steady, seed: 3}, cfg, o)
				if ro.err != nil {
					t.Fatal(ro.err)
				}
				want := AuxTarget(apps[0])
				for i, tr := range ro.transitions {
					if got := tr.Aux != nil; got != tc.want || (got && !slices.Equal(tr.Aux, want)) {
						t.Fatalf("transition %d: aux %v, want %v (%v)", i, tr.Aux, want, tc.want)
					}
				}
			})
		}
	})
}
