package train

import (
	"context"
	"errors"
	"fmt"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// Embedding guard kinds (EvidenceOptions.MetaGuard): the per-dimension
// range alone, or with the Mahalanobis ellipsoid (nn.EmbedGuard).
const (
	GuardBox         = "box"
	GuardMahalanobis = "mahalanobis"
)

// GuardMargin widens the embedding guard's range (FitGuard) on each side
// by this share of its width: the range is that of a few hundred greedy
// episodes, and a new app as alike as another training app would be should
// not leave it by a hair.
const GuardMargin = 0.1

// guarder is a learner with an embedding guard (Meta-PPO).
type guarder interface {
	SetGuard(*nn.EmbedGuard) error
}

var _ guarder = metaLearner{}

// SetGuard installs the Meta-PPO's embedding guard (nn.EmbedGuard).
func (l metaLearner) SetGuard(g *nn.EmbedGuard) error { return l.m.SetGuard(g) }

// FitGuard installs on l, a Meta-PPO acting in the residual action space,
// the guard of the embeddings it computes on apps: one greedy episode per
// app and trace kind of o.Traces, every window's embedding (the first,
// short windows included), the per-dimension range widened by GuardMargin.
// With kind GuardMahalanobis the guard also holds the ellipsoid of those
// embeddings (nn.EmbedGuard.AddEllipse, radius widened by
// GuardMargin). Outside it l follows the default in every dimension where
// that is legal (learn.FollowAction), the action that costs nothing
// relative to the default whatever the workload. The episodes' seeds
// derive from seed. It returns the guard installed.
func FitGuard(ctx context.Context, l Learner, apps []sim.App, o Options, seed uint64, kind string) (*nn.EmbedGuard, error) {
	if kind != GuardBox && kind != GuardMahalanobis {
		return nil, fmt.Errorf("embedding guard: kind must be %s or %s, got %q", GuardBox, GuardMahalanobis, kind)
	}
	g, ok := l.(guarder)
	em, ok2 := l.(embedder)
	if !ok || !ok2 {
		return nil, fmt.Errorf("embedding guard: a %s learner has no embedding", l.Kind())
	}
	sh, err := learn.ShapeOf(l.PolicyConfig())
	if err != nil {
		return nil, fmt.Errorf("embedding guard: %w", err)
	}
	if sh.Residual == nil {
		return nil, errors.New("embedding guard: following the default, the guard's fallback, is an action of the residual action space only")
	}
	if len(apps) == 0 || len(o.Traces) == 0 {
		return nil, fmt.Errorf("embedding guard: needs apps and trace kinds, got %d and %d", len(apps), len(o.Traces))
	}
	// The guard being fitted must not act: the episodes show the range of
	// the learner's own embeddings.
	if err := g.SetGuard(nil); err != nil {
		return nil, err
	}
	cfg := o.SimConfig()
	var es [][]float64
	for i, app := range apps {
		for k, trace := range o.Traces {
			ro := runEpisode(ctx, l, spec{
				index: i, stage: lifecycle.Serving, app: app, kind: sim.TraceKind(trace),
				seed: mix(seed, 0x6775617264+uint64(i*len(o.Traces)+k)),
			}, cfg, o)
			if ro.err != nil {
				return nil, fmt.Errorf("embedding guard, %s: %w", app.Name, ro.err)
			}
			windows := make([][]nn.Step, len(ro.transitions))
			for j, t := range ro.transitions {
				windows[j] = t.Window
			}
			e, err := em.EmbedBatch(windows)
			if err != nil {
				return nil, fmt.Errorf("embedding guard, %s: %w", app.Name, err)
			}
			es = append(es, e...)
		}
	}
	guard, err := nn.NewEmbedGuard(es, GuardMargin, int(learn.FollowAction))
	if err == nil && kind == GuardMahalanobis {
		err = guard.AddEllipse(es, GuardMargin)
	}
	if err != nil {
		return nil, fmt.Errorf("embedding guard: %w", err)
	}
	if err := g.SetGuard(guard); err != nil {
		return nil, fmt.Errorf("embedding guard: %w", err)
	}
	return guard, nil
}
