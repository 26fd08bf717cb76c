package train

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// Policy kinds the trainer builds (Options.Policy), named like the kinds of
// their checkpoints.
const (
	// PolicyPPO is the plain PPO actor-critic on the state.
	PolicyPPO = nn.KindPPO
	// PolicyMetaPPO is Meta-PPO: a GRU encoder reads the workload's recent
	// trajectory and its embedding joins the state at the input of actor
	// and critic.
	PolicyMetaPPO = nn.KindMetaPPO
)

// Learner is a trainable policy as the trainer, the agent and the
// evaluator use it: PPO (which ignores windows) or Meta-PPO (which embeds
// them). Implementations are safe for concurrent use.
type Learner interface {
	// Kind is PolicyPPO or PolicyMetaPPO.
	Kind() string
	// WindowLen is how many recent steps Act reads; 0 when it reads none.
	WindowLen() int
	// SignatureLen is how many signature values each step of the window
	// carries (nn.MetaConfig.SignatureDim, learn.Signature); 0 when
	// none.
	SignatureLen() int
	// Act decides on state given the steps of the workload that preceded
	// it, oldest first.
	Act(state []float64, window []nn.Step, mask []bool, greedy bool, rng *rand.Rand) (nn.Decision, error)
	// Update runs PPO on a batch of experience with windows.
	Update(batch []nn.MetaTransition) (nn.Stats, error)
	// BehaviourClone imitates a teacher's demonstrations with windows.
	BehaviourClone(batch []nn.MetaDemonstration) (nn.BCStats, error)
	// MarshalBinary returns the learner's checkpoint (policy format).
	MarshalBinary() ([]byte, error)
	// SetLearningRateScale scales the configured learning rate by s in
	// (0, 1] for the updates that follow (Options.LearningRateEnd).
	SetLearningRateScale(s float64) error
	// PolicyConfig is the learner's configuration (of Meta-PPO: its PPO
	// part), which says what it reads and chooses among (learn.ShapeOf).
	PolicyConfig() nn.Config
}

// FromPPO wraps a PPO learner.
func FromPPO(p *nn.PPO) Learner { return ppoLearner{p} }

// FromMetaPPO wraps a Meta-PPO learner.
func FromMetaPPO(m *nn.MetaPPO) Learner { return metaLearner{m} }

// NewLearner returns a freshly initialised learner of o.Policy.
func NewLearner(o Options) (Learner, error) {
	cfg, err := o.policyConfig()
	if err != nil {
		return nil, err
	}
	switch o.Policy {
	case "", PolicyPPO:
		p, err := nn.NewPPO(cfg)
		if err != nil {
			return nil, err
		}
		return FromPPO(p), nil
	case PolicyMetaPPO:
		m, err := nn.NewMetaPPO(o.metaConfig(cfg))
		if err != nil {
			return nil, err
		}
		return FromMetaPPO(m), nil
	}
	return nil, fmt.Errorf("unknown policy %q (known: %s, %s)", o.Policy, PolicyPPO, PolicyMetaPPO)
}

// ParseLearner restores a learner of either kind from its checkpoint.
func ParseLearner(b []byte) (Learner, error) {
	kind, err := nn.CheckpointKind(b)
	if err != nil {
		return nil, err
	}
	switch kind {
	case PolicyPPO:
		p, err := nn.NewPPOFromCheckpoint(b)
		if err != nil {
			return nil, err
		}
		return FromPPO(p), nil
	case PolicyMetaPPO:
		m, err := nn.NewMetaPPOFromCheckpoint(b)
		if err != nil {
			return nil, err
		}
		return FromMetaPPO(m), nil
	}
	return nil, fmt.Errorf("%w: a %q checkpoint is not an agent policy (want %s or %s)", nn.ErrIncompatibleCheckpoint, kind, PolicyPPO, PolicyMetaPPO)
}

// CloneLearner returns an independent copy of l (weights, optimiser state
// and configuration), e.g. to fine-tune one pre-trained policy on several
// apps.
func CloneLearner(l Learner) (Learner, error) {
	b, err := l.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return ParseLearner(b)
}

type ppoLearner struct{ p *nn.PPO }

func (l ppoLearner) Kind() string      { return PolicyPPO }
func (l ppoLearner) WindowLen() int    { return 0 }
func (l ppoLearner) SignatureLen() int { return 0 }

// PPO returns the wrapped learner, e.g. to serve it as a
// nn.DiscreteLearner.
func (l ppoLearner) PPO() *nn.PPO { return l.p }

func (l ppoLearner) Act(state []float64, _ []nn.Step, mask []bool, greedy bool, rng *rand.Rand) (nn.Decision, error) {
	return l.p.Act(state, mask, greedy, rng)
}

func (l ppoLearner) Update(batch []nn.MetaTransition) (nn.Stats, error) {
	plain := make([]nn.Transition, len(batch))
	for i, t := range batch {
		plain[i] = t.Transition
	}
	return l.p.Update(plain)
}

func (l ppoLearner) BehaviourClone(batch []nn.MetaDemonstration) (nn.BCStats, error) {
	plain := make([]nn.Demonstration, len(batch))
	for i, d := range batch {
		plain[i] = d.Demonstration
	}
	return l.p.BehaviourClone(plain)
}

func (l ppoLearner) MarshalBinary() ([]byte, error) { return l.p.MarshalBinary() }

func (l ppoLearner) SetLearningRateScale(s float64) error { return l.p.SetLearningRateScale(s) }

type metaLearner struct{ m *nn.MetaPPO }

func (l metaLearner) Kind() string      { return PolicyMetaPPO }
func (l metaLearner) WindowLen() int    { return l.m.Config().Window }
func (l metaLearner) SignatureLen() int { return l.m.Config().SignatureDim }

func (l metaLearner) Act(state []float64, window []nn.Step, mask []bool, greedy bool, rng *rand.Rand) (nn.Decision, error) {
	return l.m.ActWindow(state, window, mask, greedy, rng)
}

func (l metaLearner) Update(batch []nn.MetaTransition) (nn.Stats, error) {
	return l.m.Update(batch)
}

func (l metaLearner) BehaviourClone(batch []nn.MetaDemonstration) (nn.BCStats, error) {
	return l.m.BehaviourClone(batch)
}

func (l metaLearner) MarshalBinary() ([]byte, error) { return l.m.MarshalBinary() }

func (l metaLearner) SetLearningRateScale(s float64) error { return l.m.SetLearningRateScale(s) }

func (l ppoLearner) PolicyConfig() nn.Config    { return l.p.Config() }
func (l metaLearner) PolicyConfig() nn.Config   { return l.m.Config().Config }
func (l frozenLearner) PolicyConfig() nn.Config { return l.f.Config().Config }

func (l ppoLearner) Freeze() *nn.Frozen  { return l.p.Freeze() }
func (l metaLearner) Freeze() *nn.Frozen { return l.m.Freeze() }

// freezer is a learner whose current weights can be pinned, as the
// rl-agent pins a workload's weights when it is promoted to Serving.
type freezer interface {
	Freeze() *nn.Frozen
}

// frozenLearner acts with weights pinned at a promotion to Serving. It
// never trains: a Serving app's episodes do not train the shared learner.
type frozenLearner struct {
	f                 *nn.Frozen
	window, signature int
}

var (
	_ freezer = ppoLearner{}
	_ freezer = metaLearner{}
	_ Learner = frozenLearner{}
)

// freeze returns a learner pinned to l's current weights, or l itself when
// it cannot be pinned (a test's stand-in).
func freeze(l Learner) Learner {
	if fz, ok := l.(freezer); ok {
		return frozenLearner{f: fz.Freeze(), window: l.WindowLen(), signature: l.SignatureLen()}
	}
	return l
}

func (l frozenLearner) Kind() string      { return l.f.Kind() }
func (l frozenLearner) WindowLen() int    { return l.window }
func (l frozenLearner) SignatureLen() int { return l.signature }

func (l frozenLearner) Act(state []float64, window []nn.Step, mask []bool, greedy bool, rng *rand.Rand) (nn.Decision, error) {
	ds, err := l.f.ActBatch([][]float64{state}, [][]nn.Step{window}, [][]bool{mask}, greedy, rng)
	if err != nil {
		return nn.Decision{}, err
	}
	return ds[0], nil
}

var errFrozen = errors.New("a frozen policy does not train")

func (l frozenLearner) Update([]nn.MetaTransition) (nn.Stats, error) {
	return nn.Stats{}, errFrozen
}

func (l frozenLearner) BehaviourClone([]nn.MetaDemonstration) (nn.BCStats, error) {
	return nn.BCStats{}, errFrozen
}

func (l frozenLearner) MarshalBinary() ([]byte, error) { return l.f.MarshalBinary() }

func (l frozenLearner) SetLearningRateScale(float64) error { return errFrozen }
