//go:build e2e

package e2e

import (
	"testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/vpa"
)

// What the fused default recommends for the steady load of these tests,
// computed from the load and the policy's rules (pkg/core/fusion) rather
// than read back from its bounds: a check that a value lies within the
// autoscaler's minAllowed and maxAllowed restates the clamp, and holds for
// any recommendation.
//
// CPU (rule 2): the target is p90(per-pod usage) / τ, τ the target
// utilisation (hpa.DefaultTargetCPUUtilization without a CPU goal, the
// goal's with one), at least vpa.DefaultPodMinCPU. The decaying
// histogram's percentile is the upper end of its bucket, and buckets grow
// by 5% (pkg/core/vpa), so an exact usage gives a target in [1, 1.05] of
// usage/τ. The tolerance is wider, [0.9, 1.15]: metrics-server's rate of
// KWOK's cumulative counter is off by a millicore or two from the
// emulator's usage (TestAutoscalingLoop accepts 30m ± 6m from it), and a
// reading off by 10% at most must not fail the test, while a target from
// another rule (τ 0.5 for 0.7, the request kept by rule 5, the SLO floor
// of rule 3, a clamp) is further off than that.
const (
	expectedLow  = 0.90
	expectedHigh = 1.15
	// emulatedPodCPU is the per-pod CPU usage (millicores) of loopApp and
	// sloApp at baseRate over two pods: 3 requests/s of 10 ms each.
	emulatedPodCPU = 30
	// goalUtilization is the CPU goal of loopMPA (averageUtilization 50).
	goalUtilization = 0.5
)

// expectedCPUTarget is the fused default's CPU target (millicores) for a
// steady per-pod usage of usage millicores at target utilisation tau.
func expectedCPUTarget(usage, tau float64) float64 {
	return max(usage/tau, vpa.DefaultPodMinCPU*1000)
}

// checkCPUTarget fails the test unless m's CPU target is within
// [expectedLow, expectedHigh] of expectedCPUTarget(usage, tau).
func checkCPUTarget(t *testing.T, what string, m *v1alpha1.MultidimPodAutoscaler, usage, tau float64) {
	t.Helper()
	want := expectedCPUTarget(usage, tau)
	if got := float64(targetCPU(m)); got < expectedLow*want || got > expectedHigh*want {
		t.Errorf("%s: cpu target %gm, want %.0fm (%gm of usage at %g utilisation) within [%.0fm, %.0fm]",
			what, got, want, usage, tau, expectedLow*want, expectedHigh*want)
	}
}

// defaultTau is the fused default's target utilisation without a CPU goal.
const defaultTau = hpa.DefaultTargetCPUUtilization

// expectedMemoryTarget is the fused default's memory target (bytes) for
// the emulated apps at baseRate: their working set is 64 MiB and a
// fraction of a request in flight, 74 MiB or so with VPA's 15% margin,
// below VPA's per-pod minimum, which is then the target.
const expectedMemoryTarget = vpa.DefaultPodMinMemory
