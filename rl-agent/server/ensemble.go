package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// An ensemble server answers every decision the agent takes with residual
// policies trained offline (one per training seed, `rl-agent train`) that
// must agree to deviate from the default (learn.Agree): the policy that
// docs/results/evidence-residual.md measured as never worse than the fused default by more
// than a point of SLO-violating windows on 99% of held-out runs, where
// each member alone was on 88–95%.
//
// Its weights never change: nothing trains, so OnlineTraining decides as
// greedily as Serving (exploring would only cost), no workload is pinned
// to a frozen copy, and every decision names the same policy version.
// The lifecycle is the agent's as usual: the defaults act while a workload
// bootstraps, the promotion gates judge the ensemble's episodes, and the
// retraining detector hands a workload whose reward drops back to the
// defaults for a while.

// Ensemble configures a server that serves an ensemble of frozen residual
// policies (Options.Ensemble) instead of a learner.
type Ensemble struct {
	// Members are frozen residual PPO policies that read the same state
	// features (nn.FreezeCheckpoint of `rl-agent train` checkpoints);
	// at least 2.
	Members []*nn.Frozen
	// Quorum is how many members must deviate the same way for the
	// ensemble to deviate from the default; 0 means all of them.
	Quorum int
}

// ensembleKind names an ensemble in the checkpoint's policy entry, where a
// learner writes its weights.
const ensembleKind = "ensemble"

// ensembleState is the checkpoint's policy entry of an ensemble server:
// the weights come from the flags at every start, so the checkpoint only
// says which they were.
type ensembleState struct {
	Kind    string   `json:"kind"`
	Quorum  int      `json:"quorum"`
	Members []string `json:"members"` // sha256 of each member's weights
}

// ensemble is a validated Ensemble.
type ensemble struct {
	members []*nn.Frozen
	quorum  int
	sizes   []int
	state   ensembleState
	// name is the policy version every decision reports: the quorum, the
	// size and a digest of the members' weights.
	name string
}

// newEnsemble validates e and returns it with the shape every agent must
// share.
func newEnsemble(e *Ensemble) (*ensemble, learn.PolicyShape, error) {
	n := len(e.Members)
	if n < 2 {
		return nil, learn.PolicyShape{}, fmt.Errorf("an ensemble needs at least 2 members, got %d", n)
	}
	q := e.Quorum
	if q == 0 {
		q = n
	}
	if q < 1 || q > n {
		return nil, learn.PolicyShape{}, fmt.Errorf("ensemble quorum %d out of [0, %d] (0: all members)", e.Quorum, n)
	}
	ens := &ensemble{members: e.Members, quorum: q, state: ensembleState{Kind: ensembleKind, Quorum: q}}
	var shape learn.PolicyShape
	all := sha256.New()
	for i, m := range e.Members {
		if m == nil {
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d is nil", i+1)
		}
		if m.Kind() != nn.KindPPO {
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d: %w: a %q policy; an ensemble serves %q policies", i+1, nn.ErrIncompatibleCheckpoint, m.Kind(), nn.KindPPO)
		}
		sh, err := learn.ShapeOf(m.Config().Config)
		if err != nil {
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d: %w", i+1, err)
		}
		if sh.Residual == nil {
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d: %w: it acts in the paper's action space; an ensemble needs residual policies, whose choices can agree on following the default", i+1, nn.ErrIncompatibleCheckpoint)
		}
		switch {
		case i == 0:
			shape = sh
		case !fusion.SameVariant(sh.Anchor, shape.Anchor):
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d: %w: trained beside another default (anchor %q) than member 1 (%q)", i+1, nn.ErrIncompatibleCheckpoint, sh.Anchor, shape.Anchor)
		case sh.FeaturesOff != shape.FeaturesOff:
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d: %w: trained with other state features (%q) than member 1 (%q)", i+1, nn.ErrIncompatibleCheckpoint,
				m.Config().StateFeatures, e.Members[0].Config().StateFeatures)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			return nil, learn.PolicyShape{}, fmt.Errorf("ensemble member %d: %w", i+1, err)
		}
		sum := sha256.Sum256(b)
		ens.state.Members = append(ens.state.Members, hex.EncodeToString(sum[:]))
		all.Write(sum[:])
	}
	ens.sizes = shape.Residual.Sizes()
	ens.name = fmt.Sprintf("ensemble-%dof%d-%s", q, n, hex.EncodeToString(all.Sum(nil))[:12])
	return ens, shape, nil
}

// actBatch answers states: each member acts greedily on all of them, and
// per decision learn.Agree combines their choices knowing what each sets
// (values[i], Prepared.ChoiceValue). A decision's Value is the members'
// mean.
func (e *ensemble) actBatch(states [][]float64, masks [][]bool, values []func(d, i int) float64) ([]nn.Decision, error) {
	per := make([][]nn.Decision, len(e.members))
	for m, f := range e.members {
		ds, err := f.ActBatch(states, nil, masks, true, nil)
		if err != nil {
			return nil, fmt.Errorf("ensemble member %d: %w", m+1, err)
		}
		per[m] = ds
	}
	out := make([]nn.Decision, len(states))
	choices := make([][]int, len(e.members))
	for i := range states {
		var v float64
		for m := range e.members {
			choices[m] = nn.SplitAction(per[m][i].Action, e.sizes)
			v += per[m][i].Value
		}
		agreed, err := learn.Agree(choices, e.quorum, values[i])
		if err != nil {
			return nil, err
		}
		out[i] = nn.Decision{Action: nn.JoinAction(agreed, e.sizes), Value: v / float64(len(e.members))}
	}
	return out, nil
}

// checkpoint is the policy entry an ensemble server writes.
func (e *ensemble) checkpoint() ([]byte, error) { return json.Marshal(e.state) }

// restore checks the policy entry of a checkpoint: one an ensemble wrote
// is accepted whatever its members were (they come from the flags; a
// change is logged), a learner's weights are refused, since serving an
// ensemble from that state directory would overwrite what it learnt.
func (e *ensemble) restore(b []byte) error {
	st, ok := decodeEnsembleState(b)
	if !ok {
		return fmt.Errorf("%w: the state directory holds a trained policy; an ensemble does not train and would overwrite it at the first checkpoint: serve that state directory without --ensemble-checkpoints, or use another one", nn.ErrIncompatibleCheckpoint)
	}
	if st.Quorum != e.state.Quorum || !slices.Equal(st.Members, e.state.Members) {
		klog.InfoS("The ensemble differs from the one the checkpoint was written by; the workloads keep their stages", "quorum", e.quorum, "previousQuorum", st.Quorum,
			"members", len(e.state.Members), "previousMembers", len(st.Members))
	}
	return nil
}

// decodeEnsembleState reads the policy entry of an ensemble's checkpoint;
// false for anything else (a learner's weights).
func decodeEnsembleState(b []byte) (ensembleState, bool) {
	var st ensembleState
	if err := json.Unmarshal(b, &st); err != nil || st.Kind != ensembleKind {
		return ensembleState{}, false
	}
	return st, true
}

// errEnsembleCheckpoint refuses, in a learner server, a checkpoint an
// ensemble server wrote.
var errEnsembleCheckpoint = fmt.Errorf("%w: the state directory was written by an ensemble of frozen policies (--ensemble-checkpoints), which holds no weights to train on: serve it with the same flags, or use another state directory", nn.ErrIncompatibleCheckpoint)
