// Package rival finds the other autoscalers of a workload: a
// HorizontalPodAutoscaler, a VerticalPodAutoscaler, a KEDA ScaledObject
// (which drives an HPA of its own) or a Knative PodAutoscaler naming the
// same target as a MultidimPodAutoscaler. Two controllers writing /scale
// make replicas flap, and two webhooks and updaters resize or evict pods
// toward different targets; the recommender reports each rival and leaves
// the dimension it contests to it.
package rival

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

// Dimension is what a rival autoscaler changes.
type Dimension string

// Dimensions.
const (
	// Horizontal: the replica count (through /scale).
	Horizontal Dimension = "Horizontal"
	// Vertical: pod resources (by eviction, in-place resize or admission).
	Vertical Dimension = "Vertical"
)

// Rival is one other autoscaler of a target.
type Rival struct {
	// Kind and Name name the object, e.g. HorizontalPodAutoscaler web.
	Kind, Name string
	Dimension  Dimension
}

func (r Rival) String() string { return r.Kind + " " + r.Name }

// Kind is one kind of autoscaler the scanner lists.
type Kind struct {
	Resource schema.GroupVersionResource
	Kind     string
	// ListKind is the kind of its list, as a fake dynamic client needs it.
	ListKind string
	// target returns the target u names and the dimension it contests;
	// ok is false when it contests none (e.g. a VPA in mode Off).
	target func(u *unstructured.Unstructured) (ref Ref, dim Dimension, ok bool)
}

// Ref is a target reference as the rival spells it.
type Ref struct {
	APIVersion, Kind, Name string
}

// Kinds are the autoscalers the recommender looks for. The RBAC in
// deploy/recommender grants list on each.
var Kinds = []Kind{
	{
		Resource: schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		Kind:     "HorizontalPodAutoscaler", ListKind: "HorizontalPodAutoscalerList",
		target: func(u *unstructured.Unstructured) (Ref, Dimension, bool) {
			r, ok := refAt(u, "spec", "scaleTargetRef")
			return r, Horizontal, ok
		},
	},
	{
		Resource: schema.GroupVersionResource{Group: "autoscaling.k8s.io", Version: "v1", Resource: "verticalpodautoscalers"},
		Kind:     "VerticalPodAutoscaler", ListKind: "VerticalPodAutoscalerList",
		target: func(u *unstructured.Unstructured) (Ref, Dimension, bool) {
			r, ok := refAt(u, "spec", "targetRef")
			// A VPA in mode Off only recommends: it changes no pod.
			mode, _, _ := unstructured.NestedString(u.Object, "spec", "updatePolicy", "updateMode")
			return r, Vertical, ok && mode != "Off"
		},
	},
	{
		Resource: schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"},
		Kind:     "ScaledObject", ListKind: "ScaledObjectList",
		target: func(u *unstructured.Unstructured) (Ref, Dimension, bool) {
			r, ok := refAt(u, "spec", "scaleTargetRef")
			// KEDA's defaults.
			if r.Kind == "" {
				r.Kind = "Deployment"
			}
			if r.APIVersion == "" {
				r.APIVersion = "apps/v1"
			}
			return r, Horizontal, ok
		},
	},
	{
		Resource: schema.GroupVersionResource{Group: "autoscaling.internal.knative.dev", Version: "v1alpha1", Resource: "podautoscalers"},
		Kind:     "PodAutoscaler", ListKind: "PodAutoscalerList",
		target: func(u *unstructured.Unstructured) (Ref, Dimension, bool) {
			r, ok := refAt(u, "spec", "scaleTargetRef")
			return r, Horizontal, ok
		},
	},
}

func refAt(u *unstructured.Unstructured, path ...string) (Ref, bool) {
	m, ok, _ := unstructured.NestedStringMap(u.Object, path...)
	if !ok {
		return Ref{}, false
	}
	r := Ref{APIVersion: m["apiVersion"], Kind: m["kind"], Name: m["name"]}
	return r, r.Name != ""
}

// TargetOf returns the target u (an object of k) contests, in namespace
// ns; ok is false when it contests none.
func (k *Kind) TargetOf(u *unstructured.Unstructured) (mpa.Target, Dimension, bool) {
	r, dim, ok := k.target(u)
	if !ok || r.Kind == "" {
		return mpa.Target{}, "", false
	}
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return mpa.Target{Namespace: u.GetNamespace(), Group: gv.Group, Kind: r.Kind, Name: r.Name}, dim, true
}

// Scanner lists the autoscalers of every Kind.
type Scanner struct {
	client dynamic.Interface
	kinds  []Kind
}

// NewScanner returns a scanner of kinds (Kinds when nil) through client.
func NewScanner(client dynamic.Interface, kinds []Kind) *Scanner {
	if kinds == nil {
		kinds = Kinds
	}
	return &Scanner{client: client, kinds: kinds}
}

// Scan lists every kind in namespace ("" for all) and returns the rivals
// by the target they contest, each list sorted. A kind whose API is not
// served has no rivals. Other failures are joined in the error, with the
// rivals of the kinds that could be listed: a caller must not take a
// failed list for "no rival".
func (s *Scanner) Scan(ctx context.Context, namespace string) (map[mpa.Target][]Rival, error) {
	out := map[mpa.Target][]Rival{}
	var errs []error
	for i := range s.kinds {
		k := &s.kinds[i]
		list, err := s.client.Resource(k.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			// The kind's API is not served (e.g. KEDA not installed):
			// asked again at the next scan.
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", k.Resource.GroupResource(), err))
			continue
		}
		for j := range list.Items {
			u := &list.Items[j]
			if u.GetDeletionTimestamp() != nil {
				continue
			}
			if t, dim, ok := k.TargetOf(u); ok {
				out[t] = append(out[t], Rival{Kind: k.Kind, Name: u.GetName(), Dimension: dim})
			}
		}
	}
	for t, rs := range out {
		slices.SortFunc(rs, func(a, b Rival) int { return strings.Compare(a.String(), b.String()) })
		out[t] = rs
	}
	return out, errors.Join(errs...)
}

// Contested returns the dimensions rs contest.
func Contested(rs []Rival) (horizontal, vertical bool) {
	for _, r := range rs {
		switch r.Dimension {
		case Horizontal:
			horizontal = true
		case Vertical:
			vertical = true
		}
	}
	return horizontal, vertical
}
