package train

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// fingerprint is what l decides on a few fixed states: its values and
// action probabilities, which any change of weights moves.
func fingerprint(t *testing.T, l Learner) string {
	t.Helper()
	var b strings.Builder
	for k := range 3 {
		s := make([]float64, learn.StateDim)
		for i := range s {
			s[i] = float64((i*7+k*3)%5) / 4
		}
		d, err := l.Act(s, nil, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%.12g %.12g;", d.Value, d.Probs)
	}
	return b.String()
}

func TestValidatorSelects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept func(k int) bool
		// want is the validation whose snapshot training ends with; -1:
		// none, the last weights.
		want int
	}{
		{name: "the best accepted", accept: func(k int) bool { return k == 1 || k == 2 }, want: 1},
		{name: "the initial policy", accept: func(k int) bool { return k == 0 }, want: 0},
		{name: "none accepted", accept: func(int) bool { return false }, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := residualOptions()
			o.BootstrapEpisodes, o.Episodes, o.BatchEpisodes = 0, 8, 2 // 4 updates
			o.Checkpoint = filepath.Join(t.TempDir(), "agent.ckpt")
			o.ValidateEvery = 1
			var prints []string
			o.Validator = func(_ context.Context, l Learner) (Validation, error) {
				prints = append(prints, fingerprint(t, l))
				k := len(prints) - 1
				// Scores fall with training, so the earliest accepted wins.
				return Validation{Accept: tc.accept(k), Score: float64(10 - k)}, nil
			}
			res := mustTrain(t, o)
			if len(res.Validations) != 5 || len(prints) != 5 {
				t.Fatalf("%d validations (%d calls), want the initial policy's and one per update, 5", len(res.Validations), len(prints))
			}
			for k, v := range res.Validations {
				if v.Update != k || v.Episode != 2*k {
					t.Errorf("validation %d after %d updates and %d episodes, want %d and %d", k, v.Update, v.Episode, k, 2*k)
				}
			}
			if prints[1] == prints[4] {
				t.Fatal("training did not change the policy: the test cannot tell snapshots apart")
			}
			if res.Selected != tc.want {
				t.Fatalf("selected %d, want %d", res.Selected, tc.want)
			}
			want := prints[len(prints)-1]
			if tc.want >= 0 {
				want = prints[tc.want]
			}
			if got := fingerprint(t, res.Learner); got != want {
				t.Errorf("the learner is not the selected snapshot")
			}
			saved, err := LoadCheckpoint(o.Checkpoint)
			if err != nil {
				t.Fatal(err)
			}
			if got := fingerprint(t, saved); got != want {
				t.Errorf("the checkpoint is not the selected snapshot")
			}
		})
	}
}

func TestValidatorErrors(t *testing.T) {
	o := residualOptions()
	o.Validator = func(context.Context, Learner) (Validation, error) { return Validation{}, errors.New("boom") }
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "validation interval") {
		t.Errorf("a validator without an interval: %v", err)
	}
	o.ValidateEvery = 1
	if _, err := Train(context.Background(), o); err == nil || !strings.Contains(err.Error(), "validation after 0 updates: boom") {
		t.Errorf("a failing validator: %v", err)
	}
}
