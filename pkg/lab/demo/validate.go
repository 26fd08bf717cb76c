package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/train"
)

// ValidationOptions say how training snapshots are judged
// (train.Options.Validator): greedy, with the safeguard on, on held-out
// apps of a seed of their own, each run paired with a built-in baseline's.
type ValidationOptions struct {
	// Apps is the number of validation apps; 0 turns validation off.
	Apps int
	// Seed generates them; it must differ from the training seed and the
	// held-out sets' (DefaultValidationSeed is far from both).
	Seed uint64
	// Steps is the number of windows per run.
	Steps int
	// Every is how many PPO updates pass between validations.
	Every int
	// Baseline is the built-in policy the runs are paired with (a name of
	// DefaultPolicies or a fused variant, e.g. "fused:limit-target=0.7").
	Baseline string
	// MaxWorse is the largest fraction of runs in which an accepted
	// snapshot violates the SLO in more than eval.WorseMargin more of the
	// windows than the baseline.
	MaxWorse float64
}

// Validation defaults: 16 apps × every trace kind, a day each, every 5
// updates (the checkpoint interval), beside the fused default, at most 2%
// of runs worse by a point (learned-policy safety goal).
const (
	DefaultValidationSeed     = 1_000_001
	DefaultValidationApps     = 16
	DefaultValidationEvery    = 5
	DefaultValidationMaxWorse = 0.02
)

// DefaultValidationOptions returns validation off, with the other defaults
// set for when Apps is.
func DefaultValidationOptions() ValidationOptions {
	return ValidationOptions{
		Seed: DefaultValidationSeed, Steps: DefaultSteps, Every: DefaultValidationEvery,
		Baseline: PolicyFused, MaxWorse: DefaultValidationMaxWorse,
	}
}

// Validate rejects options that cannot run; with Apps 0 it accepts any.
func (v *ValidationOptions) Validate() error {
	if v.Apps == 0 {
		return nil
	}
	var errs []error
	if v.Apps < 0 {
		errs = append(errs, fmt.Errorf("validation apps must be >= 0, got %d", v.Apps))
	}
	if v.Steps <= 0 || v.Every <= 0 {
		errs = append(errs, fmt.Errorf("validation steps (%d) and interval (%d updates) must be > 0", v.Steps, v.Every))
	}
	if !(v.MaxWorse >= 0 && v.MaxWorse <= 1) {
		errs = append(errs, fmt.Errorf("validation's largest share of worse runs must be in [0, 1], got %g", v.MaxWorse))
	}
	if err := validPolicy(v.Baseline); err != nil {
		errs = append(errs, fmt.Errorf("validation baseline: %w", err))
	}
	return errors.Join(errs...)
}

// Apply sets t's validator (when v.Apps > 0) for training with t's
// window, resize mode, tenants and trace kinds.
func (v *ValidationOptions) Apply(t *train.Options) error {
	if v.Apps == 0 {
		return nil
	}
	if err := v.Validate(); err != nil {
		return err
	}
	if v.Seed == t.Seed {
		return fmt.Errorf("validation seed %d is the training seed", v.Seed)
	}
	runs, err := Runs(Options{Apps: v.Apps, Seed: v.Seed, Steps: v.Steps, Step: t.Step, Traces: t.Traces})
	if err != nil {
		return fmt.Errorf("validation runs: %w", err)
	}
	cfg := t.SimConfig()
	base, maxWorse := contender(v.Baseline), v.MaxWorse
	eo := eval.Options{Config: cfg, Workers: t.Workers, SeriesRun: -1}
	// The baseline's runs are the same at every validation: they run once,
	// at the first, and each snapshot's runs are paired with them. Training
	// calls the validator from one goroutine.
	var baseRuns []eval.RunResult
	t.ValidateEvery = v.Every
	t.Validator = func(ctx context.Context, l train.Learner) (train.Validation, error) {
		if baseRuns == nil {
			rep, err := eval.Evaluate(ctx, runs, []eval.Contender{base}, eo)
			if err != nil {
				return train.Validation{}, fmt.Errorf("baseline %s: %w", base.Name, err)
			}
			baseRuns = rep.Results
		}
		rep, err := eval.Evaluate(ctx, runs, []eval.Contender{train.Contender(l, train.AgentOptions{})}, eo)
		if err != nil {
			return train.Validation{}, err
		}
		paired := eval.Report{Results: append(slices.Clone(baseRuns), rep.Results...)}
		cs, err := paired.Compare(base.Name)
		if err != nil {
			return train.Validation{}, err
		}
		c := cs[0]
		return train.Validation{
			Score:  c.Reward.Mean,
			Accept: c.SLOViolationRate.Mean <= 0 && c.Worse <= maxWorse,
			Summary: fmt.Sprintf("against %s on %d runs: SLO %+.3f points, cost %+.1f%%, reward %+.4f, %.1f%% of runs worse by a point",
				base.Name, c.Pairs, 100*c.SLOViolationRate.Mean, 100*c.CostRatio.Mean, c.Reward.Mean, 100*c.Worse),
		}, nil
	}
	return nil
}

// WriteValidations prints the snapshots' judgements and which one the
// checkpoint holds.
func WriteValidations(w io.Writer, res *train.Result) {
	if len(res.Validations) == 0 {
		return
	}
	fmt.Fprintf(w, "Validation of %d snapshots:\n", len(res.Validations))
	for i, v := range res.Validations {
		mark := " "
		if i == res.Selected {
			mark = "*"
		}
		verdict := "rejected"
		if v.Accept {
			verdict = "accepted"
		}
		fmt.Fprintf(w, " %s after %4d updates (%5d episodes): %s; %s\n", mark, v.Update, v.Episode, v.Summary, verdict)
	}
	if res.Selected < 0 {
		fmt.Fprintln(w, "No snapshot was accepted: the checkpoint holds the last weights.")
		return
	}
	v := res.Validations[res.Selected]
	fmt.Fprintf(w, "The checkpoint holds the snapshot after %d updates (*), the best accepted.\n", v.Update)
}
