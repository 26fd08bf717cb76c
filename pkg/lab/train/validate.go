package train

import (
	"context"
	"fmt"
)

// Validation is the judgement of one snapshot of the learner on runs that
// neither training nor evaluation uses (Options.Validator).
type Validation struct {
	// Update is the number of PPO updates before the snapshot (0: the
	// initial learner); Episode the number of episodes rolled out.
	Update  int `json:"update"`
	Episode int `json:"episode"`
	// Score ranks the accepted snapshots: higher is better.
	Score float64 `json:"score"`
	// Accept says whether the snapshot may be selected.
	Accept bool `json:"accept"`
	// Summary says what the validator measured, for logs and reports.
	Summary string `json:"summary"`
}

// Validator judges a greedy snapshot of the learner. It must not train l
// or keep it after it returns; training waits for it.
type Validator func(ctx context.Context, l Learner) (Validation, error)

// selection keeps the accepted snapshot of the highest score.
type selection struct {
	best  []byte // its checkpoint; nil until a snapshot is accepted
	score float64
}

// validate judges the learner's current weights with o.Validator, records
// the judgement in res and keeps the weights if they are the best accepted
// so far.
func (s *selection) validate(ctx context.Context, o Options, l Learner, updates, episodes int, res *Result) error {
	v, err := o.Validator(ctx, freeze(l))
	if err != nil {
		return fmt.Errorf("train: validation after %d updates: %w", updates, err)
	}
	v.Update, v.Episode = updates, episodes
	res.Validations = append(res.Validations, v)
	if !v.Accept || (s.best != nil && v.Score <= s.score) {
		return nil
	}
	b, err := l.MarshalBinary()
	if err != nil {
		return fmt.Errorf("train: keeping the snapshot after %d updates: %w", updates, err)
	}
	s.best, s.score = b, v.Score
	res.Selected = len(res.Validations) - 1
	return nil
}

// selected returns the kept snapshot as a learner, or nil when none was
// accepted.
func (s *selection) selected() (Learner, error) {
	if s.best == nil {
		return nil, nil
	}
	l, err := ParseLearner(s.best)
	if err != nil {
		return nil, fmt.Errorf("train: restoring the selected snapshot: %w", err)
	}
	return l, nil
}
