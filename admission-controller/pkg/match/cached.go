package match

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/target"
)

// The in-memory forms of the lookups, for Matcher.MatchCached. Each
// answers as its request-making form would, or says it cannot (ok false)
// when that form would ask the API server or fail.

// CachedMPAs is MPAIndex.ForTarget from memory.
type CachedMPAs interface {
	CachedForTarget(namespace string, target Ref) ([]*v1alpha1.MultidimPodAutoscaler, bool)
}

// CachedOwners is Owners.Controller from memory.
type CachedOwners interface {
	CachedController(namespace string, obj Ref) (*Ref, bool)
}

// CachedSelectors is Selectors.Selector from memory.
type CachedSelectors interface {
	CachedSelector(namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, bool)
}

var (
	_ CachedMPAs      = (*InformerIndex)(nil)
	_ CachedOwners    = (*MetadataOwners)(nil)
	_ CachedSelectors = (*target.Resolver)(nil)
)

type cachedLookups struct {
	mpas      CachedMPAs
	owners    CachedOwners
	selectors CachedSelectors
}

// cached returns the matcher's in-memory lookups; ok is false unless all
// three have one.
func (m *Matcher) cached() (c cachedLookups, ok bool) {
	if c.mpas, ok = m.MPAs.(CachedMPAs); !ok {
		return c, false
	}
	if c.owners, ok = m.Owners.(CachedOwners); !ok {
		return c, false
	}
	c.selectors, ok = m.Selectors.(CachedSelectors)
	return c, ok
}

// CachedForTarget implements CachedMPAs: the informer's index is memory.
func (x *InformerIndex) CachedForTarget(namespace string, target Ref) ([]*v1alpha1.MultidimPodAutoscaler, bool) {
	out, err := x.ForTarget(namespace, target)
	return out, err == nil
}

// CachedController implements CachedOwners: the informer's answer, unless
// the object is not in it and Controller would GET it, or reading it
// fails.
func (o *MetadataOwners) CachedController(namespace string, obj Ref) (*Ref, bool) {
	gk := schema.GroupKind{Group: obj.Group, Kind: obj.Kind}
	inf, ok := o.listers[gk]
	if !ok {
		return nil, true
	}
	got, err := inf.Lister().ByNamespace(namespace).Get(obj.Name)
	switch {
	case apierrors.IsNotFound(err) && o.client != nil:
		return nil, false
	case apierrors.IsNotFound(err):
		return nil, true
	case err != nil:
		return nil, false
	}
	m, err := meta.Accessor(got)
	if err != nil {
		return nil, false
	}
	return controllerOf(m), true
}
