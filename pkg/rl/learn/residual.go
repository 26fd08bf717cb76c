package learn

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/safeguard"
)

// The residual action space: the agent acts relative to the fused default's
// recommendation of the same window, with one choice per dimension
// (replicas, CPU request, memory request). Each dimension has a choice that
// follows the default and one that holds the allocation in force, so an
// agent that follows in every dimension is exactly the default, and can
// only do worse by choosing to deviate.

// Dimension is one axis of a residual action.
type Dimension int

const (
	DimReplicas Dimension = iota
	DimCPU
	DimMemory
	// NumDimensions is the number of choices a residual action makes.
	NumDimensions
)

func (d Dimension) String() string {
	switch d {
	case DimReplicas:
		return "replicas"
	case DimCPU:
		return "cpu"
	case DimMemory:
		return "memory"
	}
	return fmt.Sprintf("Dimension(%d)", int(d))
}

// Choice is one option of a dimension: hold the allocation in force, or
// take the default's value plus Offset (replicas only) times Factor.
type Choice struct {
	Hold   bool
	Offset int32
	Factor float64
}

// Follow is the choice that takes the default's value unchanged.
var Follow = Choice{Factor: 1}

// Hold keeps the allocation in force.
var Hold = Choice{Hold: true}

func (c Choice) String() string {
	switch {
	case c.Hold:
		return "hold"
	case c.Offset != 0:
		return fmt.Sprintf("%+d", c.Offset)
	case c == Follow:
		return "follow"
	}
	return "x" + strconv.FormatFloat(c.Factor, 'g', -1, 64)
}

// ResidualSpace lists each dimension's choices. Index 0 of every dimension
// is Follow: the action an untrained agent takes.
type ResidualSpace [NumDimensions][]Choice

// DefaultResidualSpace is follow, hold, two offsets and two factors each way
// for replicas, and follow, hold and ±15%, ±30% for each request.
func DefaultResidualSpace() ResidualSpace {
	vertical := []Choice{Follow, Hold, {Factor: 0.7}, {Factor: 0.85}, {Factor: 1.15}, {Factor: 1.3}}
	return ResidualSpace{
		DimReplicas: {Follow, Hold, {Offset: -2, Factor: 1}, {Offset: -1, Factor: 1}, {Offset: 1, Factor: 1}, {Offset: 2, Factor: 1}, {Factor: 0.8}, {Factor: 1.25}},
		DimCPU:      vertical,
		DimMemory:   vertical,
	}
}

// Sizes returns the number of choices per dimension (the heads of a
// factored policy).
func (s *ResidualSpace) Sizes() []int {
	out := make([]int, NumDimensions)
	for d := range s {
		out[d] = len(s[d])
	}
	return out
}

// Validate checks that each dimension starts with Follow and has valid,
// distinct choices.
func (s *ResidualSpace) Validate() error {
	for d, cs := range s {
		if len(cs) == 0 || cs[0] != Follow {
			return fmt.Errorf("residual space: %s must start with follow", Dimension(d))
		}
		seen := map[Choice]bool{}
		for _, c := range cs {
			if seen[c] {
				return fmt.Errorf("residual space: %s lists %s twice", Dimension(d), c)
			}
			seen[c] = true
			if !c.Hold && !(c.Factor > 0) || math.IsInf(c.Factor, 0) {
				return fmt.Errorf("residual space: %s choice %s needs a finite factor > 0", Dimension(d), c)
			}
			if Dimension(d) != DimReplicas && c.Offset != 0 {
				return fmt.Errorf("residual space: %s choice %s: offsets are for replicas only", Dimension(d), c)
			}
		}
	}
	return nil
}

// Residual is a residual action: an index into each dimension's choices.
type Residual [NumDimensions]int

// Choices returns the choices r selects in s.
func (s *ResidualSpace) Choices(r Residual) ([NumDimensions]Choice, error) {
	var out [NumDimensions]Choice
	for d, i := range r {
		if i < 0 || i >= len(s[d]) {
			return out, fmt.Errorf("residual %s choice %d out of range [0, %d)", Dimension(d), i, len(s[d]))
		}
		out[d] = s[d][i]
	}
	return out, nil
}

// ApplyResidual returns the recommendation of residual choices ch over def,
// the default's recommendation for obs:
//   - replicas: the default's count plus Offset, times Factor (rounded),
//     clamped to the constraints; Hold keeps the replicas in force;
//   - each request: the default's target, lower and upper bound, all times
//     Factor, clamped to minAllowed/maxAllowed. Scaling the bounds with the
//     target keeps the default's hysteresis: a request already within the
//     scaled bounds is not changed, so a steady deviation does not fight
//     the default's own bounds every window. Hold sets target and bounds to
//     the request in force.
//
// A resource no container controls, or that def does not name, is left as
// def has it.
func ApplyResidual(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation, ch [NumDimensions]Choice) workload.Recommendation {
	rec := def
	rec.Containers = make([]workload.ContainerRecommendation, len(def.Containers))
	copy(rec.Containers, def.Containers)
	rc := ch[DimReplicas]
	switch {
	case rc.Hold:
		rec.Replicas = c.ClampReplicas(obs.Replicas)
	case def.Replicas > 0:
		n := residualReplicas(def.Replicas, rc)
		rec.Replicas = c.ClampReplicas(int32(math.Max(1, math.Min(n, math.MaxInt32))))
	}
	for i := range rec.Containers {
		cr := &rec.Containers[i]
		p := c.ContainerPolicy(cr.Name)
		var cur workload.Resources
		for _, ct := range obs.Containers {
			if ct.Name == cr.Name {
				cur = ct.Requests
			}
		}
		for _, dr := range []struct {
			dim Dimension
			res workload.Resource
		}{{DimCPU, workload.CPU}, {DimMemory, workload.Memory}} {
			vc := ch[dr.dim]
			r := dr.res
			if !p.Controls(r) || cr.Target.Get(r) <= 0 || vc == Follow {
				continue
			}
			lo, hi := cr.LowerBound.Get(r), cr.UpperBound.Get(r)
			t := cr.Target.Get(r)
			if vc.Hold {
				if cur.Get(r) <= 0 {
					continue
				}
				t, lo, hi = cur.Get(r), cur.Get(r), cur.Get(r)
			} else {
				t, lo, hi = t*vc.Factor, lo*vc.Factor, hi*vc.Factor
			}
			clampAllowed := func(v float64) float64 {
				if v <= 0 {
					return v
				}
				v = math.Max(v, math.Max(p.MinAllowed.Get(r), floor(r)))
				if m := p.MaxAllowed.Get(r); m > 0 {
					v = math.Min(v, m)
				}
				return v
			}
			cr.Target = cr.Target.With(r, clampAllowed(t))
			cr.LowerBound = cr.LowerBound.With(r, clampAllowed(lo))
			cr.UpperBound = cr.UpperBound.With(r, clampAllowed(hi))
		}
	}
	if ch != [NumDimensions]Choice{Follow, Follow, Follow} {
		rec.Source = workload.SourceAgent
	}
	return rec
}

// residualReplicas is the replica count choice ch makes of the default's
// count, before clamping.
func residualReplicas(def int32, ch Choice) float64 {
	return math.Round(float64(def+ch.Offset) * ch.Factor)
}

// ResidualMask returns, per dimension, which choices are legal for obs.
// Follow and Hold are always legal. A replica choice is illegal when its
// count falls outside the constraints (the clamp would make it another
// choice), and, as the safeguard below across pods, when it would cut the
// CPU capacity (replicas × per-pod CPU) below both the one in force and
// the default's while the pods are hot (replicaCutRefused); a vertical
// choice is illegal when no container controls the resource, and, as
// FaaSRM's safeguard, when it would set a request below both the one in
// force and the default's while the window's peak usage reached
// SafeguardThreshold of that request: a refused step gets no probability,
// so it is never proposed.
func ResidualMask(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation, s *ResidualSpace) [NumDimensions][]bool {
	var m [NumDimensions][]bool
	for d := range s {
		m[d] = make([]bool, len(s[d]))
		for i, ch := range s[d] {
			m[d][i] = ch == Follow || ch.Hold
		}
	}
	for i, ch := range s[DimReplicas] {
		if m[DimReplicas][i] || def.Replicas <= 0 {
			continue
		}
		n := residualReplicas(def.Replicas, ch)
		lo, hi := float64(max(c.MinReplicas, 1)), math.Inf(1)
		if c.MaxReplicas > 0 {
			hi = float64(c.MaxReplicas)
		}
		m[DimReplicas][i] = n >= lo && n <= hi && !replicaCutRefused(obs, c, def, n)
	}
	for _, dr := range []struct {
		dim Dimension
		res workload.Resource
	}{{DimCPU, workload.CPU}, {DimMemory, workload.Memory}} {
		for i, ch := range s[dr.dim] {
			if m[dr.dim][i] {
				continue
			}
			m[dr.dim][i] = verticalLegal(obs, c, def, dr.res, ch.Factor)
		}
	}
	return m
}

// replicaCutRefused is the safeguard's rule across pods: n replicas of the
// default's CPU per pod are refused when, for some container, that CPU
// capacity is below both the one in force (obs.Replicas × its request) and
// the default's (def.Replicas × the default's target), and the window's
// peak per-pod usage reached SafeguardThreshold of the request in force.
// CPU load divides across pods, so pods at their request carry all they
// can, and fewer of them, no larger, carry less: on a real node a learner
// that cut three 200m pods at their limit to two while the SLO was broken
// lost the capacity the default had to add back a window later. Fewer,
// larger pods of the same or more capacity (a consolidation) stay legal,
// and memory is not summed across pods (each pod holds its own base).
func replicaCutRefused(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation, n float64) bool {
	if obs.Replicas <= 0 || n >= float64(def.Replicas) {
		return false
	}
	for _, ct := range obs.Containers {
		req := ct.Requests.CPU
		if !safeguard.Hot(ct.Peak.CPU, req, SafeguardThreshold) {
			continue
		}
		per := req
		p := c.ContainerPolicy(ct.Name)
		if cr, ok := def.Container(ct.Name); ok && p.Controls(workload.CPU) && cr.Target.CPU > 0 {
			per = cr.Target.CPU
		}
		if n*per < math.Min(float64(obs.Replicas)*req, float64(def.Replicas)*per) {
			return true
		}
	}
	return false
}

// verticalLegal reports whether scaling the default's target of r by factor
// is allowed: some container controls r and the safeguard does not refuse
// the cut for any of them.
func verticalLegal(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation, r workload.Resource, factor float64) bool {
	controlled := false
	for _, ct := range obs.Containers {
		p := c.ContainerPolicy(ct.Name)
		cr, ok := def.Container(ct.Name)
		if !p.Controls(r) || !ok || cr.Target.Get(r) <= 0 {
			continue
		}
		controlled = true
		req := ct.Requests.Get(r)
		t := cr.Target.Get(r)
		if factor < 1 && t*factor < math.Min(req, t) && req > 0 && ct.Peak.Get(r) >= SafeguardThreshold*req {
			return false
		}
	}
	return controlled
}

// ParseResidual reads a constant residual written as slash-separated
// dimension=choice pairs, e.g. "replicas=+1/cpu=x0.85/memory=hold"; a
// dimension left out follows the default. Choices are "follow", "hold",
// "+N"/"-N" (replicas) and "xF" (a factor).
func ParseResidual(spec string) ([NumDimensions]Choice, error) {
	out := [NumDimensions]Choice{Follow, Follow, Follow}
	if strings.TrimSpace(spec) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(spec, "/") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return out, fmt.Errorf("residual %q: %q is not dimension=choice", spec, kv)
		}
		d := NumDimensions
		for i := range NumDimensions {
			if i.String() == k {
				d = i
			}
		}
		if d == NumDimensions {
			return out, fmt.Errorf("residual %q: unknown dimension %q (replicas, cpu, memory)", spec, k)
		}
		var ch Choice
		switch {
		case v == "follow":
			ch = Follow
		case v == "hold":
			ch = Hold
		case strings.HasPrefix(v, "x"):
			f, err := strconv.ParseFloat(v[1:], 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return out, fmt.Errorf("residual %q: factor %q must be a finite number > 0", spec, v)
			}
			ch = Choice{Factor: f}
		case (strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-")) && d == DimReplicas:
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return out, fmt.Errorf("residual %q: offset %q is not an integer", spec, v)
			}
			ch = Choice{Offset: int32(n), Factor: 1}
		default:
			return out, fmt.Errorf("residual %q: choice %q for %s is not follow, hold, xF or (replicas) ±N", spec, v, d)
		}
		out[d] = ch
	}
	return out, nil
}

// ResidualPolicy applies a constant residual to a default policy: each
// window it asks Default for its recommendation and applies the choices,
// falling back to Follow in a dimension where the choice is illegal
// (ResidualMask: the safeguard, the replica bounds). It is the baseline a
// learned residual policy must beat, and the check that following the
// default in every dimension is the default.
type ResidualPolicy struct {
	name        string
	def         workload.Policy
	constraints workload.Constraints
	choices     [NumDimensions]Choice
	space       ResidualSpace
}

var _ workload.Policy = (*ResidualPolicy)(nil)

// NewResidualPolicy wraps def for a workload under c.
func NewResidualPolicy(name string, def workload.Policy, c workload.Constraints, ch [NumDimensions]Choice) *ResidualPolicy {
	p := &ResidualPolicy{name: name, def: def, constraints: c, choices: ch}
	for d := range p.space {
		p.space[d] = []Choice{Follow, ch[d]}
	}
	return p
}

// Name implements workload.Policy.
func (p *ResidualPolicy) Name() string { return p.name }

// Recommend implements workload.Policy.
func (p *ResidualPolicy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	def, err := p.def.Recommend(ctx, obs)
	if err != nil {
		return workload.Recommendation{}, err
	}
	mask := ResidualMask(&obs, &p.constraints, def, &p.space)
	var ch [NumDimensions]Choice
	for d := range ch {
		ch[d] = Follow
		if mask[d][1] {
			ch[d] = p.choices[d]
		}
	}
	return ApplyResidual(&obs, &p.constraints, def, ch), nil
}

// PaperPolicy forces a default policy through the AWARE paper's one-step
// actions (no-op, ±1 replica, ±10% CPU, ±10% memory): each window it takes
// the legal action nearest the default's recommendation (NearestAction)
// and applies it. It measures what the paper's action space costs a
// perfect imitator of the default.
type PaperPolicy struct {
	name        string
	def         workload.Policy
	constraints workload.Constraints
}

var _ workload.Policy = (*PaperPolicy)(nil)

// NewPaperPolicy wraps def for a workload under c.
func NewPaperPolicy(name string, def workload.Policy, c workload.Constraints) *PaperPolicy {
	return &PaperPolicy{name: name, def: def, constraints: c}
}

// Name implements workload.Policy.
func (p *PaperPolicy) Name() string { return p.name }

// Recommend implements workload.Policy.
func (p *PaperPolicy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	def, err := p.def.Recommend(ctx, obs)
	if err != nil {
		return workload.Recommendation{}, err
	}
	steps := DefaultSteps()
	a := NearestAction(&obs, &p.constraints, def, steps, Mask(&obs, &p.constraints, steps))
	return Apply(&obs, &p.constraints, a, steps), nil
}

// FollowAction is the joint action (nn.JoinAction) that follows the
// default in every dimension: Follow is index 0 of each.
const FollowAction = 0

// NumActions is the number of joint actions: the product of the sizes.
func (s *ResidualSpace) NumActions() int {
	n := 1
	for d := range s {
		n *= len(s[d])
	}
	return n
}

// FlatMask is ResidualMask with the dimensions one after the other, as a
// policy with one head per dimension reads it.
func (s *ResidualSpace) FlatMask(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation) []bool {
	var out []bool
	for _, m := range ResidualMask(obs, c, def, s) {
		out = append(out, m...)
	}
	return out
}

// Act is the recommendation of joint action a (nn.JoinAction of one
// choice per dimension) over def. It fails when a is out of range or, with
// mask (FlatMask) set, names a choice the mask forbids.
func (s *ResidualSpace) Act(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation, a int, mask []bool) (workload.Recommendation, error) {
	if a < 0 || a >= s.NumActions() {
		return workload.Recommendation{}, fmt.Errorf("residual action %d out of range [0, %d)", a, s.NumActions())
	}
	idx := nn.SplitAction(a, s.Sizes())
	if mask != nil {
		off := 0
		for d, i := range idx {
			if off+i >= len(mask) || !mask[off+i] {
				return workload.Recommendation{}, fmt.Errorf("residual %s choice %s is not legal here", Dimension(d), s[d][i])
			}
			off += len(s[d])
		}
	}
	ch, err := s.Choices(Residual(idx))
	if err != nil {
		return workload.Recommendation{}, err
	}
	return ApplyResidual(obs, c, def, ch), nil
}

// HasOpinion reports whether def recommends anything: a residual acts
// relative to it, so without one the allocation stays as it is.
func HasOpinion(def workload.Recommendation) bool {
	return def.Replicas > 0 || len(def.Containers) > 0
}

// PolicyShape is what an agent and a policy must agree on besides the
// state's length: the action space and the optional features.
type PolicyShape struct {
	// Residual is the residual action space; nil is the paper's actions.
	Residual *ResidualSpace
	// FeaturesOff are the optional features the policy was trained
	// without; states read them as 0.
	FeaturesOff Features
	// Anchor is the variant of the default the policy was trained beside
	// (nn.Config.Anchor); empty: the fused default.
	Anchor string
}

// ShapeOf checks that a policy of configuration c reads this package's
// state and chooses among the paper's actions or, with one head per
// dimension, DefaultResidualSpace's choices, and says which.
func ShapeOf(c nn.Config) (PolicyShape, error) {
	var sh PolicyShape
	if c.StateDim != StateDim {
		return sh, fmt.Errorf("%w: the policy reads %d state features, the agent encodes %d", nn.ErrIncompatibleCheckpoint, c.StateDim, StateDim)
	}
	on, err := ParseFeatures(c.StateFeatures)
	if err != nil {
		return sh, fmt.Errorf("%w: state features: %w", nn.ErrIncompatibleCheckpoint, err)
	}
	sh.FeaturesOff = AllFeatures &^ on
	sh.Anchor = c.Anchor
	if len(c.Heads) <= 1 {
		if c.NumActions != int(NumActions) {
			return sh, fmt.Errorf("%w: the policy has %d actions, the paper's action space %d", nn.ErrIncompatibleCheckpoint, c.NumActions, NumActions)
		}
		return sh, nil
	}
	space := DefaultResidualSpace()
	if !slices.Equal(c.Heads, space.Sizes()) {
		return sh, fmt.Errorf("%w: the policy's heads %v are not the residual action space's %v", nn.ErrIncompatibleCheckpoint, c.Heads, space.Sizes())
	}
	sh.Residual = &space
	return sh, nil
}

// String names the shape's action space: "paper" or "residual".
func (sh PolicyShape) String() string {
	if sh.Residual != nil {
		return "residual"
	}
	return "paper"
}

// DefaultFollowBias is the initial output bias of each residual head's
// "follow the default" choice: it makes an untrained agent follow the
// default in every dimension when greedy, and in about half its windows
// (all three heads) when sampling.
const DefaultFollowBias = 3.0

// ResidualConfig is the policy configuration of the residual action space
// (DefaultResidualSpace): one head per dimension, each starting on
// "follow the default" with the given output bias.
func ResidualConfig(followBias float64) nn.Config {
	space := DefaultResidualSpace()
	sizes := space.Sizes()
	n := 0
	for _, k := range sizes {
		n += k
	}
	c := nn.DefaultConfig(StateDim, n)
	c.Heads = sizes
	c.InitBias = make([]float64, n)
	off := 0
	for _, k := range sizes {
		c.InitBias[off] = followBias // index 0 of every head is Follow
		off += k
	}
	return c
}

// FormatResidual writes choices as ParseResidual reads them, every
// dimension named: "replicas=+1/cpu=follow/memory=x0.85".
func FormatResidual(ch [NumDimensions]Choice) string {
	parts := make([]string, NumDimensions)
	for d := range NumDimensions {
		parts[d] = d.String() + "=" + ch[d].String()
	}
	return strings.Join(parts, "/")
}

// ActionName names action a of a policy of this shape for operators: the
// paper action's name, or the residual choices (FormatResidual); "" when a
// is not an action of the shape.
func (sh PolicyShape) ActionName(a int) string {
	if sh.Residual == nil {
		if a < 0 || a >= int(NumActions) {
			return ""
		}
		return Action(a).String()
	}
	if a < 0 || a >= sh.Residual.NumActions() {
		return ""
	}
	ch, err := sh.Residual.Choices(Residual(nn.SplitAction(a, sh.Residual.Sizes())))
	if err != nil {
		return ""
	}
	return FormatResidual(ch)
}

// ChoiceValue is the value dimension d takes when choice ch is applied over
// def and the other dimensions follow it: the replica count, or the sum of
// the containers' targets of the request. Choices of one dimension are
// ordered by it: an ensemble compares its members' choices by what they
// do, not by their index.
func ChoiceValue(obs *workload.Observation, c *workload.Constraints, def workload.Recommendation, d Dimension, ch Choice) float64 {
	all := [NumDimensions]Choice{Follow, Follow, Follow}
	all[d] = ch
	rec := ApplyResidual(obs, c, def, all)
	if d == DimReplicas {
		return float64(rec.Replicas)
	}
	r := workload.CPU
	if d == DimMemory {
		r = workload.Memory
	}
	var sum float64
	for _, cr := range rec.Containers {
		sum += cr.Target.Get(r)
	}
	return sum
}
