package train

import (
	"math"
	"slices"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// TestSpreadApps: without a spread the apps are unchanged; with one, each
// of the three parameters is multiplied by its own factor in [1, spread],
// the factors reach across the range, nothing else changes, the input is
// not modified and equal seeds give equal apps.
func TestSpreadApps(t *testing.T) {
	apps, err := TrainingApps(3, 64)
	if err != nil {
		t.Fatal(err)
	}
	orig := slices.Clone(apps)
	for _, tc := range []struct {
		name   string
		spread float64
	}{{"off", 0}, {"one", 1}, {"four", 4}, {"sixteen", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpreadApps(apps, 7, tc.spread)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := SpreadApps(apps, 7, tc.spread)
			other, _ := SpreadApps(apps, 8, tc.spread)
			if !slices.EqualFunc(apps, orig, sameApp) {
				t.Fatal("SpreadApps modified its input")
			}
			if !slices.EqualFunc(got, again, sameApp) {
				t.Error("equal seeds gave different apps")
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, a := range got {
				fs := []float64{a.CPUSeconds / apps[i].CPUSeconds, a.MemoryPerRequest / apps[i].MemoryPerRequest,
					float64(a.StartupDelay) / float64(apps[i].StartupDelay)}
				for _, f := range fs {
					if f < 1 || f > math.Max(tc.spread, 1)*(1+1e-9) {
						t.Fatalf("%s: factor %v outside [1, %v]", a.Name, f, tc.spread)
					}
					lo, hi = math.Min(lo, f), math.Max(hi, f)
				}
				if fs[0] == fs[1] && tc.spread > 1 {
					t.Errorf("%s: CPU and memory share one factor %v", a.Name, fs[0])
				}
				b := a
				b.CPUSeconds, b.MemoryPerRequest, b.StartupDelay = apps[i].CPUSeconds, apps[i].MemoryPerRequest, apps[i].StartupDelay
				if !sameApp(b, apps[i]) {
					t.Errorf("%s: more than the three parameters changed", a.Name)
				}
			}
			if tc.spread <= 1 {
				if !slices.EqualFunc(got, apps, sameApp) {
					t.Error("no spread changed the apps")
				}
				return
			}
			// 192 log-uniform draws: the extremes lie near both ends.
			if ln := math.Log(tc.spread); math.Log(lo) > 0.05*ln || math.Log(hi) < 0.95*ln {
				t.Errorf("factors span [%v, %v], want most of [1, %v]", lo, hi, tc.spread)
			}
			if slices.EqualFunc(got, other, sameApp) {
				t.Error("different seeds gave equal apps")
			}
		})
	}
	if _, err := SpreadApps(apps, 1, math.Inf(1)); err == nil {
		t.Error("an infinite spread was accepted")
	}
}

// sameApp compares the fields SpreadApps may touch and the sizing a caller
// sees.
func sameApp(a, b sim.App) bool {
	return a.Name == b.Name && a.CPUSeconds == b.CPUSeconds && a.MemoryPerRequest == b.MemoryPerRequest &&
		a.StartupDelay == b.StartupDelay && a.IOWait == b.IOWait && a.BaseMemory == b.BaseMemory &&
		a.Requests == b.Requests && a.Limits == b.Limits && a.Replicas == b.Replicas && a.SLO == b.SLO
}

// TestPretrainParamSpread: with a spread both pre-trainings learn on the
// same spread apps (the Meta-PPO's differs from the plain one, the PPO's
// too), and without one Pretrain is what it was (Train's own apps).
func TestPretrainParamSpread(t *testing.T) {
	e := tinyEvidence()
	if apps, err := e.PretrainAppList(); err != nil || apps != nil {
		t.Fatalf("no spread: apps %v, %v; want nil (Train's own)", apps, err)
	}
	e.PretrainParamSpread = 4
	apps, err := e.PretrainAppList()
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := TrainingApps(e.Seed, e.PretrainApps)
	if len(apps) != len(plain) || slices.EqualFunc(apps, plain, sameApp) {
		t.Fatalf("spread apps %d equal to the plain ones", len(apps))
	}
	spread := mustPretrain(t, e)
	e.PretrainParamSpread = 0
	base := mustPretrain(t, e)
	for _, l := range []struct {
		name        string
		got, plainL Learner
	}{{"ppo", spread.PPO, base.PPO}, {"meta-ppo", spread.Meta, base.Meta}} {
		if slices.Equal(marshal(t, l.got), marshal(t, l.plainL)) {
			t.Errorf("%s: the spread did not change its pre-training", l.name)
		}
	}
}
