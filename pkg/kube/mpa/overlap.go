package mpa

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// Two autoscalers that name the same target would fight: each recommender
// loop would write two answers and the updater would apply both in turn.
// As in the VPA, the oldest autoscaler of a target (by creationTimestamp,
// then name, so that the choice is total and stable) governs it and the
// others stand aside. Every component applies this one rule: the
// recommender marks the others AmbiguousTarget and recommends nothing for
// them, the updater skips them, and the admission webhook sizes pods by
// the oldest.

// Target is what a scaleTargetRef names, whatever the API version.
type Target struct {
	Namespace, Group, Kind, Name string
}

// TargetOf returns the target of m; ok is false when the reference is
// unset.
func TargetOf(m *v1alpha1.MultidimPodAutoscaler) (t Target, ok bool) {
	r := m.Spec.ScaleTargetRef
	if r == nil || r.Kind == "" || r.Name == "" {
		return Target{}, false
	}
	// A malformed apiVersion still identifies a target consistently: the
	// group is then whatever ParseGroupVersion made of it, for every MPA
	// that spells it that way.
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return Target{Namespace: m.Namespace, Group: gv.Group, Kind: r.Kind, Name: r.Name}, true
}

// older reports whether a governs a target before b.
func older(a, b *v1alpha1.MultidimPodAutoscaler) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Name < b.Name
}

// Oldest returns the autoscaler that governs a target all of ms name; nil
// for none.
func Oldest(ms []*v1alpha1.MultidimPodAutoscaler) *v1alpha1.MultidimPodAutoscaler {
	var o *v1alpha1.MultidimPodAutoscaler
	for _, m := range ms {
		if o == nil || older(m, o) {
			o = m
		}
	}
	return o
}

// Shadowed maps the UID of every autoscaler in all that does not govern its
// target to the one that does. It costs one pass over all.
func Shadowed(all []*v1alpha1.MultidimPodAutoscaler) map[types.UID]*v1alpha1.MultidimPodAutoscaler {
	governing := make(map[Target]*v1alpha1.MultidimPodAutoscaler, len(all))
	for _, m := range all {
		if t, ok := TargetOf(m); ok {
			if g := governing[t]; g == nil || older(m, g) {
				governing[t] = m
			}
		}
	}
	out := map[types.UID]*v1alpha1.MultidimPodAutoscaler{}
	for _, m := range all {
		if t, ok := TargetOf(m); ok {
			if g := governing[t]; g != m {
				out[m.UID] = g
			}
		}
	}
	return out
}

// ReasonConflictingAutoscaler is the ConfigUnsupported reason of an
// autoscaler whose target another kind of autoscaler (an HPA, a VPA, a KEDA
// ScaledObject, a Knative PodAutoscaler) also acts on. The recommender
// then leaves the contested dimension empty in the status: no
// desiredReplicas for a horizontal rival, no recommendation for a vertical
// one.
const ReasonConflictingAutoscaler = "ConflictingAutoscaler"

// ReplicasLeftToRival reports whether another autoscaler owns the replica
// count of s's target, so that the updater must not touch it at all (not
// even to bring it within minReplicas and maxReplicas).
func ReplicasLeftToRival(s *v1alpha1.MultidimPodAutoscalerStatus) bool {
	if s.DesiredReplicas != 0 {
		return false
	}
	for _, c := range s.Conditions {
		if c.Type == v1alpha1.ConfigUnsupported {
			return c.Status == "True" && c.Reason == ReasonConflictingAutoscaler
		}
	}
	return false
}
