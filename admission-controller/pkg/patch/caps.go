package patch

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

// Caps are the bounds a namespace's LimitRanges put on what we may set. A
// zero field is absent.
type Caps struct {
	// ContainerMin and ContainerMax bound each container's requests and
	// limits (LimitRange type Container).
	ContainerMin, ContainerMax workload.Resources
	// MaxRatio bounds limit/request per container.
	MaxRatio workload.Resources
	// PodMax bounds the sum over a pod's containers (LimitRange type Pod).
	PodMax workload.Resources
}

// CapsFrom merges LimitRanges into the tightest bounds: the smallest
// maximum, the largest minimum, the smallest ratio. A namespace may hold
// several LimitRanges and the API server enforces all of them.
func CapsFrom(lrs []*corev1.LimitRange) Caps {
	var c Caps
	for _, lr := range lrs {
		if lr == nil {
			continue
		}
		for _, item := range lr.Spec.Limits {
			switch item.Type {
			case corev1.LimitTypeContainer:
				c.ContainerMax = tightestMax(c.ContainerMax, mpa.Resources(item.Max))
				c.ContainerMin = largestMin(c.ContainerMin, mpa.Resources(item.Min))
				c.MaxRatio = tightestMax(c.MaxRatio, mpa.Resources(item.MaxLimitRequestRatio))
			case corev1.LimitTypePod:
				c.PodMax = tightestMax(c.PodMax, mpa.Resources(item.Max))
			}
		}
	}
	return c
}

func tightestMax(a, b workload.Resources) workload.Resources {
	for _, r := range resourcesInOrder {
		if v := b.Get(r); v > 0 && (a.Get(r) == 0 || v < a.Get(r)) {
			a = a.With(r, v)
		}
	}
	return a
}

func largestMin(a, b workload.Resources) workload.Resources {
	for _, r := range resourcesInOrder {
		if v := b.Get(r); v > a.Get(r) {
			a = a.With(r, v)
		}
	}
	return a
}

// bound applies the container caps to one resource's new request and
// limit. With scaleLimit (RequestsAndLimits) the request and limit move
// together so the user's ratio survives; otherwise the limit is the user's
// and the request must stay within it.
func (c Caps) bound(r workload.Resource, req, lim float64, scaleLimit bool) (float64, float64) {
	hi, lo, ratio := c.ContainerMax.Get(r), c.ContainerMin.Get(r), c.MaxRatio.Get(r)
	if scaleLimit && hi > 0 && lim > hi {
		req *= hi / lim
		lim = hi
	}
	if hi > 0 && req > hi {
		req = hi
	}
	if lo > 0 && req < lo {
		if scaleLimit && lim > 0 {
			lim *= lo / req
			if hi > 0 && lim > hi {
				lim = hi
			}
		}
		req = lo
	}
	if ratio > 0 && lim > 0 && lim/req > ratio {
		req = lim / ratio
	}
	if lim > 0 && req > lim {
		req = lim
	}
	return req, lim
}
