package mpa

import (
	"encoding/json"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// StartupBoostAnnotation is the pod annotation in which the admission
// controller records the CPU start-up boost it gave each container: the
// boosted request, and the request and limit the container gets back once
// the boost ends (the values it would have had without the boost). The
// updater reads it to end the boost.
const StartupBoostAnnotation = "autoscaling.aware.dev/cpu-startup-boost"

// BoostRecord is one container's entry of StartupBoostAnnotation. The
// amounts are CPU quantities ("1500m"); an empty Limit means no limit.
type BoostRecord struct {
	// Boosted is the CPU request the boost set. A container whose request
	// is no longer this has been resized since, and is not boosted.
	Boosted string `json:"boosted"`
	// Request and Limit are the unboosted CPU request and limit.
	Request string `json:"request,omitempty"`
	Limit   string `json:"limit,omitempty"`
}

// EncodeBoost renders the annotation's value; keys are container names.
func EncodeBoost(records map[string]BoostRecord) string {
	b, err := json.Marshal(records) // a map of strings cannot fail
	if err != nil {
		return ""
	}
	return string(b)
}

// DecodeBoost parses the annotation's value.
func DecodeBoost(s string) (map[string]BoostRecord, error) {
	var out map[string]BoostRecord
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", StartupBoostAnnotation, err)
	}
	return out, nil
}

// CPUQuantity reads a CPU amount in cores from a quantity string; "" is 0.
func CPUQuantity(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	return Resources(corev1.ResourceList{corev1.ResourceCPU: q}).CPU, nil
}

// cpuBoost converts the API's boost; nil when there is none. Values the
// CRD's validation would refuse (a factor below 1, a value not above 0)
// are read as no boost rather than as a cut.
func cpuBoost(b *v1alpha1.StartupBoost) *workload.CPUBoost {
	if b == nil || b.CPU == nil {
		return nil
	}
	var out workload.CPUBoost
	if f := b.CPU.Factor; f != nil && *f >= 1 && !math.IsInf(*f, 0) {
		out.Factor = *f
	}
	if v := b.CPU.Value; v != nil {
		if c := Resources(corev1.ResourceList{corev1.ResourceCPU: *v}).CPU; c > 0 {
			out.Value = c
		}
	}
	if d := b.CPU.Duration; d != nil && d.Duration > 0 {
		out.For = d.Duration
	}
	if out.Factor <= 1 && out.Value == 0 {
		return nil
	}
	return &out
}

// HasStartupBoost reports whether any container policy of m boosts CPU.
func HasStartupBoost(c *workload.Constraints) bool {
	for i := range c.Containers {
		if c.Containers[i].StartupBoost != nil {
			return true
		}
	}
	return false
}
