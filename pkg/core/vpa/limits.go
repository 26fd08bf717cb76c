package vpa

import (
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Largest amounts a Kubernetes resource.Quantity can carry: CPU is stored in
// millicores and memory in bytes, each as an int64.
const (
	MaxCPUQuantity    = float64(math.MaxInt64) / 1000
	MaxMemoryQuantity = float64(math.MaxInt64)
)

// ScaleLimit returns the limit that keeps limit/request when the request
// moves from request to newRequest, for a quantity capped at maxQuantity.
// capped reports that the proportional value did not fit and maxQuantity
// was returned instead. The rules follow VPA's getProportionalResourceLimit:
//   - no limit (0 or invalid), or no new request: no limit (0);
//   - no current request, or request == limit: the limit follows the new
//     request exactly (Kubernetes defaults a missing request to the limit);
//   - otherwise newRequest·(limit/request), saturating at maxQuantity.
func ScaleLimit(request, newRequest, limit, maxQuantity float64) (newLimit float64, capped bool) {
	if !validAmount(limit) || limit == 0 || !validAmount(newRequest) || newRequest == 0 {
		return 0, false
	}
	if !validAmount(request) || request == 0 || request == limit {
		return newRequest, false
	}
	// Divide first: the ratio is moderate, whereas newRequest·limit can
	// overflow for large memory amounts.
	l := newRequest * (limit / request)
	if math.IsInf(l, 0) || l > maxQuantity {
		return maxQuantity, true
	}
	return l, false
}

// ScaleLimits applies ScaleLimit to CPU and memory. It is shared by the
// recommender, the admission controller and the updater so all three derive
// the same limits from a recommendation.
func ScaleLimits(request, newRequest, limit workload.Resources) (newLimit workload.Resources, capped bool) {
	cpu, c1 := ScaleLimit(request.CPU, newRequest.CPU, limit.CPU, MaxCPUQuantity)
	mem, c2 := ScaleLimit(request.Memory, newRequest.Memory, limit.Memory, MaxMemoryQuantity)
	return workload.Resources{CPU: cpu, Memory: mem}, c1 || c2
}

// Limits returns the limits a container should get when its requests move
// to newRequest under policy p: RequestsOnly keeps the current limits;
// RequestsAndLimits (the default) scales each controlled resource's limit in
// proportion. Resources the policy does not control keep their limits.
func Limits(p workload.ContainerPolicy, request, limit, newRequest workload.Resources) (workload.Resources, bool) {
	if p.ControlledValues == workload.RequestsOnly || p.Mode == workload.ContainerModeOff {
		return limit, false
	}
	scaled, capped := ScaleLimits(request, newRequest, limit)
	out := limit
	for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
		if p.Controls(r) {
			out = out.With(r, scaled.Get(r))
		}
	}
	return out, capped
}

func validAmount(x float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0
}
