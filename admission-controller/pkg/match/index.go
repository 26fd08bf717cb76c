package match

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// TargetIndex is the name of the informer index from namespace and
// scaleTargetRef to MPAs.
const TargetIndex = "scaleTargetRef"

func targetKey(namespace string, r Ref) string {
	return namespace + "/" + r.Group + "/" + r.Kind + "/" + r.Name
}

// TargetIndexFunc indexes an MPA by namespace and target, so finding the
// MPA of a pod costs one map lookup however many MPAs are cached.
func TargetIndexFunc(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.MultidimPodAutoscaler)
	if !ok {
		return nil, nil
	}
	r, ok := TargetRef(m)
	if !ok {
		return nil, nil
	}
	return []string{targetKey(m.Namespace, r)}, nil
}

// InformerIndex is the MPAIndex over an informer that has TargetIndex.
type InformerIndex struct {
	Indexer cache.Indexer
}

var _ MPAIndex = (*InformerIndex)(nil)

// AddTargetIndex adds TargetIndex to an MPA informer; call it before the
// informer starts.
func AddTargetIndex(inf cache.SharedIndexInformer) error {
	if err := inf.AddIndexers(cache.Indexers{TargetIndex: TargetIndexFunc}); err != nil {
		return fmt.Errorf("add %s index: %w", TargetIndex, err)
	}
	return nil
}

// ForTarget implements MPAIndex.
func (x *InformerIndex) ForTarget(namespace string, target Ref) ([]*v1alpha1.MultidimPodAutoscaler, error) {
	objs, err := x.Indexer.ByIndex(TargetIndex, targetKey(namespace, target))
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", TargetIndex, err)
	}
	out := make([]*v1alpha1.MultidimPodAutoscaler, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*v1alpha1.MultidimPodAutoscaler); ok {
			out = append(out, m)
		}
	}
	return out, nil
}
