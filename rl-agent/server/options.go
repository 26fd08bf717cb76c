package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// Learner is the shared policy when it reads no trajectory (PPO); a
// Meta-PPO policy is Options.MetaLearner. Freeze copies the weights it acts
// with, which Serving workloads keep acting with while it trains on.
type Learner interface {
	nn.DiscreteLearner
	Freeze() *nn.Frozen
}

// Options configure a Server. Registerer and exactly one of Learner,
// MetaLearner and Ensemble are required.
type Options struct {
	Learner Learner
	// MetaLearner is a Meta-PPO policy, served instead of Learner: each
	// workload's agent keeps its last Window steps, the batched forward
	// pass embeds them, and training uses them.
	MetaLearner *nn.MetaPPO
	// Ensemble serves frozen residual policies that must agree to deviate
	// from the default, instead of a learner: nothing trains (ensemble.go).
	Ensemble *Ensemble
	// Store persists experience and checkpoints; nil keeps state in memory
	// only.
	Store      Store
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Seed seeds the sampling of exploratory actions.
	Seed uint64
	// Steps are the vertical action sizes.
	Steps learn.Steps

	// MaxBatch is the largest number of decisions in one forward pass.
	MaxBatch int
	// BatchWait bounds how long the first decision of a batch waits for
	// others.
	BatchWait time.Duration
	// QueueSize bounds the decisions waiting for a forward pass; beyond it
	// Recommend answers Unavailable.
	QueueSize int
	// MaxWorkloads bounds the number of workloads, hence memory.
	MaxWorkloads int
	// TrainQueue bounds the training jobs waiting for the trainer; beyond
	// it jobs are dropped (and counted): experience keeps flowing and the
	// next episode trains again.
	TrainQueue int
	// FlushInterval is how often experience is flushed and the state
	// checkpointed.
	FlushInterval time.Duration
	// FlushRecords flushes experience early once this many are pending.
	FlushRecords int
	// KeepRecords is how many experience records survive a compaction.
	// The journal keeps as many in memory for the next compaction, the
	// largest of the agent's memory that does not grow with the policy: at
	// about 580 bytes a record, 9 MiB at the default, full after
	// KeepRecords outcomes however many workloads report them.
	KeepRecords int
	// Retraining bounds every workload's stays in Retraining: the defaults
	// act for at least Min episodes before the promotion gate may return
	// the workload to the agent, and after Max it returns whatever the
	// gate says (lifecycle.RetrainingBounds; zero disables each).
	Retraining lifecycle.RetrainingBounds
	// MaxFrozenPolicies bounds the frozen copies of the policy that
	// Serving workloads are pinned to (one per policy version pinned, each
	// the size of the weights). A workload promoted while that many are
	// pinned and none is of the current version shares the newest one.
	MaxFrozenPolicies int
	// WorkloadTTL forgets a workload that made no call for this long (its
	// autoscaler was probably deleted while the recommender could not say
	// so with ForgetWorkload); zero keeps workloads until forgotten.
	WorkloadTTL time.Duration
}

// DefaultOptions returns the defaults for everything but Learner, Store and
// Registerer.
func DefaultOptions() Options {
	return Options{
		Steps:         learn.DefaultSteps(),
		MaxBatch:      256,
		BatchWait:     2 * time.Millisecond,
		QueueSize:     4096,
		MaxWorkloads:  10000,
		TrainQueue:    64,
		FlushInterval: 30 * time.Second,
		FlushRecords:  512,
		KeepRecords:   16384,
		// A copy of the default PPO is 11016 weights, 86 KiB (Meta-PPO:
		// 12832, 100 KiB): 32 copies are under 3.2 MiB.
		MaxFrozenPolicies: 32,
		Retraining:        lifecycle.DefaultRetrainingBounds(),
		WorkloadTTL:       7 * 24 * time.Hour,
	}
}

func (o *Options) validate() error {
	var errs []error
	n := 0
	for _, set := range []bool{o.Learner != nil, o.MetaLearner != nil, o.Ensemble != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, errors.New("exactly one of a learner, a meta-learner and an ensemble is required"))
	}
	if o.Registerer == nil {
		errs = append(errs, errors.New("a metrics registerer is required"))
	}
	if o.MaxBatch < 1 || o.QueueSize < 1 || o.MaxWorkloads < 1 || o.TrainQueue < 1 || o.FlushRecords < 1 || o.KeepRecords < 1 || o.MaxFrozenPolicies < 1 {
		errs = append(errs, fmt.Errorf("batch, queue, workload, record and frozen-policy limits must be >= 1: %+v", *o))
	}
	if err := o.Retraining.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.BatchWait < 0 || o.FlushInterval <= 0 || o.WorkloadTTL < 0 {
		errs = append(errs, fmt.Errorf("batchWait and workloadTTL must be >= 0 and flushInterval > 0"))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return errors.Join(errs...)
}
