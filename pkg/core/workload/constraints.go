package workload

import (
	"errors"
	"fmt"
	"time"
)

// ContainerMode says whether a container is sized by the autoscaler.
type ContainerMode string

const (
	ContainerModeAuto ContainerMode = "Auto"
	ContainerModeOff  ContainerMode = "Off"
)

// ControlledValues says which of requests and limits vertical scaling sets.
type ControlledValues string

const (
	// RequestsAndLimits sets requests and scales limits by the same factor,
	// keeping the user's limit/request ratio.
	RequestsAndLimits ControlledValues = "RequestsAndLimits"
	// RequestsOnly sets requests and leaves limits alone.
	RequestsOnly ControlledValues = "RequestsOnly"
)

// ContainerPolicy bounds the vertical recommendation for containers whose
// name matches Name ("*" matches any container without its own policy).
type ContainerPolicy struct {
	Name string
	Mode ContainerMode
	// MinAllowed and MaxAllowed bound requests; a zero field is unbounded.
	MinAllowed Resources
	MaxAllowed Resources
	// ControlledResources lists the resources that are sized; empty means
	// both CPU and memory.
	ControlledResources []Resource
	// ControlledValues defaults to RequestsAndLimits when empty.
	ControlledValues ControlledValues
	// StartupBoost, when set, raises the container's CPU while its pod
	// starts.
	StartupBoost *CPUBoost
}

// CPUBoost is a CPU start-up boost: a new pod's container gets
// Boosted(request) cores until the pod is Ready and For has passed.
type CPUBoost struct {
	// Factor multiplies the request; 0 or 1 means no factor.
	Factor float64
	// Value is a CPU amount in cores; 0 means none.
	Value float64
	// For keeps the boost this long after the pod is Ready.
	For time.Duration
}

// Boosted is the CPU request during start-up for a container that would
// otherwise request base cores: Factor × base, or Value, whichever is
// larger, and never less than base.
func (b *CPUBoost) Boosted(base float64) float64 {
	if b == nil {
		return base
	}
	return max(base, b.Factor*base, b.Value)
}

// Controls reports whether the policy sizes resource r.
func (p *ContainerPolicy) Controls(r Resource) bool {
	if p.Mode == ContainerModeOff {
		return false
	}
	if len(p.ControlledResources) == 0 {
		return true
	}
	for _, c := range p.ControlledResources {
		if c == r {
			return true
		}
	}
	return false
}

// ScalingPolicyType mirrors autoscaling/v2 HPAScalingPolicyType.
type ScalingPolicyType string

const (
	PodsScalingPolicy    ScalingPolicyType = "Pods"
	PercentScalingPolicy ScalingPolicyType = "Percent"
)

// SelectPolicy mirrors autoscaling/v2 ScalingPolicySelect.
type SelectPolicy string

const (
	SelectMax      SelectPolicy = "Max"
	SelectMin      SelectPolicy = "Min"
	SelectDisabled SelectPolicy = "Disabled"
)

// ScalingPolicy limits how much the replica count may change within Period.
type ScalingPolicy struct {
	Type   ScalingPolicyType
	Value  int32
	Period time.Duration
}

// ScalingRules mirrors autoscaling/v2 HPAScalingRules. A nil
// StabilizationWindow means "use the HPA default for the direction"; the
// default for Select is Max.
type ScalingRules struct {
	StabilizationWindow *time.Duration
	Select              SelectPolicy
	Policies            []ScalingPolicy
	// Tolerance overrides the 10% dead band when non-nil.
	Tolerance *float64
}

// Behavior mirrors autoscaling/v2 HorizontalPodAutoscalerBehavior. A nil
// direction takes the HPA defaults.
type Behavior struct {
	ScaleUp   *ScalingRules
	ScaleDown *ScalingRules
}

// Constraints are the user's bounds on what any policy may recommend.
type Constraints struct {
	MinReplicas int32
	MaxReplicas int32
	Behavior    *Behavior
	Containers  []ContainerPolicy
}

// ContainerPolicy returns the policy governing container name: its own entry,
// else the "*" entry, else a permissive Auto policy.
func (c *Constraints) ContainerPolicy(name string) ContainerPolicy {
	var wildcard *ContainerPolicy
	for i := range c.Containers {
		switch c.Containers[i].Name {
		case name:
			return c.Containers[i]
		case "*":
			wildcard = &c.Containers[i]
		}
	}
	if wildcard != nil {
		p := *wildcard
		p.Name = name
		return p
	}
	return ContainerPolicy{Name: name, Mode: ContainerModeAuto}
}

// Validate rejects contradictory bounds.
func (c *Constraints) Validate() error {
	var errs []error
	if c.MinReplicas < 0 {
		errs = append(errs, fmt.Errorf("minReplicas must be >= 0, got %d", c.MinReplicas))
	}
	if c.MaxReplicas > 0 && c.MinReplicas > c.MaxReplicas {
		errs = append(errs, fmt.Errorf("minReplicas %d > maxReplicas %d", c.MinReplicas, c.MaxReplicas))
	}
	for i, p := range c.Containers {
		if err := p.MinAllowed.Valid(); err != nil {
			errs = append(errs, fmt.Errorf("containers[%d] minAllowed: %w", i, err))
		}
		if err := p.MaxAllowed.Valid(); err != nil {
			errs = append(errs, fmt.Errorf("containers[%d] maxAllowed: %w", i, err))
		}
		for _, r := range []Resource{CPU, Memory} {
			lo, hi := p.MinAllowed.Get(r), p.MaxAllowed.Get(r)
			if hi > 0 && lo > hi {
				errs = append(errs, fmt.Errorf("containers[%d] %q: minAllowed %s %g > maxAllowed %g", i, p.Name, r, lo, hi))
			}
		}
	}
	return errors.Join(errs...)
}

// ClampReplicas bounds n to [MinReplicas, MaxReplicas]; a zero MaxReplicas is
// unbounded and a zero MinReplicas means 1.
func (c *Constraints) ClampReplicas(n int32) int32 {
	lo := max(c.MinReplicas, 1)
	if n < lo {
		n = lo
	}
	if c.MaxReplicas > 0 && n > c.MaxReplicas {
		n = c.MaxReplicas
	}
	return n
}
