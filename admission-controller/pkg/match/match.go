// Package match finds the MultidimPodAutoscaler that governs a new pod.
//
// A pod belongs to an MPA when the MPA's scaleTargetRef is one of the pod's
// controllers (followed through owner references: Pod → ReplicaSet →
// Deployment, Pod → Job → CronJob, Pod → StatefulSet, …) and the target's
// selector, read from its scale subresource, matches the pod's labels. The
// owner chain makes the lookup an index hit instead of a scan of every MPA
// in the namespace; the selector check guards against an owner reference
// that outlived a selector change. When several MPAs target the same
// controller, the oldest wins (mpa.Oldest, the rule every component
// applies), so the answer is stable.
//
// Lookups go through small interfaces (MPAIndex, Owners, Selectors) so that
// tests use fakes and production uses informers and the scale client.
package match

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/target"
)

// Ref names a controller in the pod's namespace by API group, kind and
// name; the version does not matter for identity.
type Ref struct {
	Group, Kind, Name string
}

func (r Ref) String() string {
	if r.Group == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "." + r.Group + "/" + r.Name
}

// RefFromOwner converts an owner reference.
func RefFromOwner(o *metav1.OwnerReference) Ref {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return Ref{Group: gv.Group, Kind: o.Kind, Name: o.Name}
}

// TargetRef converts an MPA's scaleTargetRef; ok is false when it is unset.
func TargetRef(m *v1alpha1.MultidimPodAutoscaler) (Ref, bool) {
	t := m.Spec.ScaleTargetRef
	if t == nil || t.Kind == "" || t.Name == "" {
		return Ref{}, false
	}
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	return Ref{Group: gv.Group, Kind: t.Kind, Name: t.Name}, true
}

// MPAIndex returns the MPAs in a namespace whose scaleTargetRef is target.
type MPAIndex interface {
	ForTarget(namespace string, target Ref) ([]*v1alpha1.MultidimPodAutoscaler, error)
}

// Owners returns the controller of an object, or nil when it has none or
// its kind is not one whose owners we follow.
type Owners interface {
	Controller(ctx context.Context, namespace string, obj Ref) (*Ref, error)
}

// Selectors returns the label selector of a scale target. pkg/kube/target's
// Resolver (scale subresource, cached) implements it.
type Selectors interface {
	Selector(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error)
}

var _ Selectors = (*target.Resolver)(nil)

// maxDepth bounds the owner walk; real chains are two or three deep, and a
// cycle of owner references must not loop forever.
const maxDepth = 8

// Matcher finds a pod's MPA.
type Matcher struct {
	MPAs      MPAIndex
	Owners    Owners
	Selectors Selectors
}

// Match returns the pod's MPA, or nil when none governs it. An error means
// the answer is unknown (e.g. the API server did not answer); the caller
// fails open.
func (m *Matcher) Match(ctx context.Context, pod *corev1.Pod) (*v1alpha1.MultidimPodAutoscaler, error) {
	found, _, err := m.match(ctx, pod, nil)
	return found, err
}

// MatchCached is Match answered from memory alone: informer caches and the
// selector cache, no request to the API server, so it never waits. ok is
// false when a lookup would have had to ask the API server, fail, or has
// no in-memory form (MPAs, Owners and Selectors must implement
// CachedMPAs, CachedOwners and CachedSelectors); the caller then uses
// Match. When ok, the answer is the one Match gives.
func (m *Matcher) MatchCached(ctx context.Context, pod *corev1.Pod) (mpa *v1alpha1.MultidimPodAutoscaler, ok bool) {
	c, ok := m.cached()
	if !ok {
		return nil, false
	}
	found, ok, _ := m.match(ctx, pod, &c)
	return found, ok
}

// lookups makes each lookup of the walk either the Matcher's own (c nil:
// always answered, or an error) or c's in-memory one (never an error, but
// answered is false when it cannot answer from memory).
type lookups struct {
	m *Matcher
	c *cachedLookups
}

func (l lookups) controller(ctx context.Context, ns string, obj Ref) (*Ref, bool, error) {
	if l.c != nil {
		r, ok := l.c.owners.CachedController(ns, obj)
		return r, ok, nil
	}
	r, err := l.m.Owners.Controller(ctx, ns, obj)
	return r, true, err
}

func (l lookups) forTarget(ns string, target Ref) ([]*v1alpha1.MultidimPodAutoscaler, bool, error) {
	if l.c != nil {
		out, ok := l.c.mpas.CachedForTarget(ns, target)
		return out, ok, nil
	}
	out, err := l.m.MPAs.ForTarget(ns, target)
	return out, true, err
}

func (l lookups) selector(ctx context.Context, ns string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, bool, error) {
	if l.c != nil {
		sel, ok := l.c.selectors.CachedSelector(ns, ref)
		return sel, ok, nil
	}
	sel, err := l.m.Selectors.Selector(ctx, ns, ref)
	return sel, true, err
}

// match walks the pod's owners and finds its MPA. With c, every lookup is
// c's in-memory one, and answered is false as soon as one cannot answer;
// without, answered is true.
func (m *Matcher) match(ctx context.Context, pod *corev1.Pod, c *cachedLookups) (found *v1alpha1.MultidimPodAutoscaler, answered bool, err error) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return nil, true, nil
	}
	l := lookups{m: m, c: c}
	ns := pod.Namespace
	// On the stack: the walk runs for every admitted pod.
	var buf [maxDepth]Ref
	chain := append(buf[:0], RefFromOwner(owner))
	for len(chain) < maxDepth {
		last := chain[len(chain)-1]
		next, ok, err := l.controller(ctx, ns, last)
		if err != nil {
			return nil, true, fmt.Errorf("owner of %s: %w", last, err)
		}
		if !ok {
			return nil, false, nil
		}
		if next == nil || contains(chain, *next) {
			break
		}
		chain = append(chain, *next)
	}
	// The top-most controller is what users normally target (the
	// Deployment, not its current ReplicaSet); a lower level still counts,
	// e.g. an MPA on a bare ReplicaSet.
	for i := len(chain) - 1; i >= 0; i-- {
		cands, ok, err := l.forTarget(ns, chain[i])
		if err != nil {
			return nil, true, fmt.Errorf("MPAs targeting %s: %w", chain[i], err)
		}
		if !ok {
			return nil, false, nil
		}
		if len(cands) == 0 {
			continue
		}
		chosen := mpa.Oldest(cands)
		sel, ok, err := l.selector(ctx, ns, chosen.Spec.ScaleTargetRef)
		if err != nil {
			return nil, true, fmt.Errorf("selector of %s: %w", chain[i], err)
		}
		if !ok {
			return nil, false, nil
		}
		// Logged once the walk has answered, so that a declined
		// MatchCached followed by Match logs it once.
		if len(cands) > 1 {
			klog.FromContext(ctx).V(2).Info("Several MPAs target the same controller; using the oldest", "target", chain[i].String(), "mpa", klog.KObj(chosen), "count", len(cands))
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			return nil, true, nil
		}
		return chosen, true, nil
	}
	return nil, true, nil
}

func contains(chain []Ref, r Ref) bool {
	for _, c := range chain {
		if c == r {
			return true
		}
	}
	return false
}
