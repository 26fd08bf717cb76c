package match

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
)

// FollowedKinds are the intermediate controllers whose owners are looked
// up. Others (Deployment, StatefulSet, custom resources) end the walk:
// they are the usual scale targets, and caching every object of every kind
// to look further would cost memory for no match.
var FollowedKinds = map[schema.GroupKind]schema.GroupVersionResource{
	{Group: "apps", Kind: "ReplicaSet"}:        {Group: "apps", Version: "v1", Resource: "replicasets"},
	{Group: "batch", Kind: "Job"}:              {Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "", Kind: "ReplicationController"}: {Group: "", Version: "v1", Resource: "replicationcontrollers"},
}

// MetadataOwners reads owner references from metadata-only informers (no
// specs are cached) and falls back to a live GET when the informer has not
// seen an object yet, which happens for the ReplicaSet of a rollout that
// started a moment ago.
type MetadataOwners struct {
	listers map[schema.GroupKind]informers.GenericInformer
	client  metadata.Interface
}

var _ Owners = (*MetadataOwners)(nil)

// NewMetadataOwners returns owners backed by the given informers, one per
// FollowedKinds entry, and client for misses (nil disables the fallback).
func NewMetadataOwners(infs map[schema.GroupKind]informers.GenericInformer, client metadata.Interface) *MetadataOwners {
	return &MetadataOwners{listers: infs, client: client}
}

// Controller implements Owners.
func (o *MetadataOwners) Controller(ctx context.Context, namespace string, obj Ref) (*Ref, error) {
	gk := schema.GroupKind{Group: obj.Group, Kind: obj.Kind}
	inf, ok := o.listers[gk]
	if !ok {
		return nil, nil
	}
	got, err := inf.Lister().ByNamespace(namespace).Get(obj.Name)
	if apierrors.IsNotFound(err) && o.client != nil {
		got, err = o.client.Resource(FollowedKinds[gk]).Namespace(namespace).Get(ctx, obj.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		// The owner is gone (or not yet visible): nothing above it.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s in %s: %w", obj, namespace, err)
	}
	m, err := meta.Accessor(got)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", obj, err)
	}
	return controllerOf(m), nil
}

// controllerOf returns the object's controller, nil when it has none.
func controllerOf(m metav1.Object) *Ref {
	for i := range m.GetOwnerReferences() {
		ref := &m.GetOwnerReferences()[i]
		if ref.Controller != nil && *ref.Controller {
			r := RefFromOwner(ref)
			return &r
		}
	}
	return nil
}
