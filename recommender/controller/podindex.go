package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// labelIndex indexes pods by "<namespace>/<key>=<value>" for each label.
// Matching every autoscaler's selector against every pod of its namespace
// is O(autoscalers × pods per namespace): 10,000 autoscalers over 100,000
// pods spent most of a loop in selector matching. Selectors almost always
// carry an equality requirement (matchLabels), so the index narrows the
// candidates to the pods sharing that label, maintained incrementally by
// the informer.
const labelIndex = "aware.dev/label"

func labelIndexFunc(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("label index: unexpected %T", obj)
	}
	out := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		out = append(out, labelIndexKey(p.Namespace, k, v))
	}
	return out, nil
}

func labelIndexKey(ns, k, v string) string { return ns + "/" + k + "=" + v }

// podsFor lists the pods of ns matching sel, through the label index when
// the selector has an equality requirement.
func (c *Controller) podsFor(ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	if c.podIndexer != nil {
		if reqs, ok := sel.Requirements(); ok {
			for _, r := range reqs {
				op := r.Operator()
				if (op == selection.Equals || op == selection.DoubleEquals || op == selection.In) && r.Values().Len() == 1 {
					objs, err := c.podIndexer.ByIndex(labelIndex, labelIndexKey(ns, r.Key(), r.Values().UnsortedList()[0]))
					if err != nil {
						return nil, fmt.Errorf("pod label index: %w", err)
					}
					out := make([]*corev1.Pod, 0, len(objs))
					for _, o := range objs {
						if p, ok := o.(*corev1.Pod); ok && sel.Matches(labels.Set(p.Labels)) {
							out = append(out, p)
						}
					}
					return out, nil
				}
			}
		}
	}
	return c.pods.Pods(ns).List(sel)
}

var _ cache.IndexFunc = labelIndexFunc
