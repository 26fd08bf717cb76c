package workload

import (
	"errors"
	"fmt"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
)

// RLMode is spec.rl.mode.
type RLMode string

const (
	// RLModeOff: the agent neither acts nor learns; the default is applied.
	RLModeOff RLMode = "Off"
	// RLModeShadow: the agent learns from the defaults and moves through its
	// stages, but the default is applied whatever the stage.
	RLModeShadow RLMode = "Shadow"
	// RLModeOn: the agent acts once its lifecycle allows.
	RLModeOn RLMode = "On"
)

// RLConfig is one workload's spec.rl as the agent needs it. It lives here,
// beside the other types a request carries, rather than with the agent
// (pkg/rl/learn, which names it learn.Config), so that a request can be
// converted and checked without linking the learners.
type RLConfig struct {
	Mode  RLMode
	Alpha float64
	Gates lifecycle.Gates
	// DefaultVariant is the variant of the fused default (fusion.ParseVariant)
	// the request's default recommendation came from; empty: the fused
	// default. The server refuses a request whose variant is not its
	// policy's anchor (PolicyShape.Anchor); the agent does not read it.
	DefaultVariant string
}

// Validate checks c as it arrives over the wire.
func (c RLConfig) Validate() error {
	var errs []error
	switch c.Mode {
	case RLModeOff, RLModeShadow, RLModeOn:
	default:
		errs = append(errs, fmt.Errorf("mode must be Off, Shadow or On, got %q", c.Mode))
	}
	if !(c.Alpha >= 0 && c.Alpha <= 1) {
		errs = append(errs, fmt.Errorf("alpha must be in [0, 1], got %v", c.Alpha))
	}
	if err := c.Gates.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gates: %w", err))
	}
	return errors.Join(errs...)
}
