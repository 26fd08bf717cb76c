package app

// The MultidimPodAutoscaler the what-if suggests applying: it targets the
// replayed Deployment, with bounds that the history and the replay of the
// fused default say are safe, and updateMode Off unless the user asks
// otherwise, so that a first apply only watches (recommendations in
// status, nothing resized).

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// The headroom of the manifest's bounds (docs/whatif.md, "The MPA
// manifest"): a request is never sized below what the pods used at their
// quietest, nor above twice what they used at their busiest; replicas range
// from the fewest the history or the fused default's replay ran to twice
// the most either ran.
const (
	// mpaCPUFloorShare of the 5th percentile of per-pod CPU usage is the
	// CPU minAllowed: half, because CPU is compressible and a pod that
	// idles at its request only runs slower.
	mpaCPUFloorShare = 0.5
	// mpaMemoryFloorShare of the 5th percentile of the working set is the
	// memory minAllowed: all of it, because a request below the idle
	// working set invites eviction under node pressure.
	mpaMemoryFloorShare = 1.0
	// mpaCeiling times the peak (CPU: 99th percentile; memory: maximum)
	// per-pod usage is maxAllowed; times the most replicas, maxReplicas.
	mpaCeiling = 2.0
	// mpaMinCPU and mpaMinMemory floor minAllowed, so an idle history does
	// not give a zero bound.
	mpaMinCPU    = 0.01
	mpaMinMemory = 16 << 20
)

// MPAFile is a workload's manifest in the output folder:
// "mpa-<namespace>-<deployment>.yaml".
func MPAFile(workload string) string {
	return "mpa-" + strings.ReplaceAll(workload, "/", "-") + ".yaml"
}

// mpaBounds are the manifest's numbers and where they came from.
type mpaBounds struct {
	MinReplicas, MaxReplicas             int32
	MinCPU, MaxCPU, MinMemory, MaxMemory float64
	// What they came from.
	cpuP5, cpuP99, memP5, memMax, repMin, repMax float64
	fusedMin, fusedMax                           int32
	fusedReplayed                                bool
	usageSteps                                   int
}

// quantile is the q-quantile (nearest rank) of the finite, non-negative
// values of v, and how many there were.
func quantile(v []float64, q float64) (float64, int) {
	var xs []float64
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return math.NaN(), 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(len(xs)-1, i))], len(xs)
}

// deriveBounds applies the rule above to a workload's history and, when
// the fused default was replayed, its run on the first seed.
func deriveBounds(s *whatif.Series, fused *eval.Series) (mpaBounds, error) {
	var b mpaBounds
	var n int
	b.cpuP5, n = quantile(s.CPU, 0.05)
	b.cpuP99, _ = quantile(s.CPU, 0.99)
	b.memP5, _ = quantile(s.Memory, 0.05)
	b.memMax, _ = quantile(s.Memory, 1)
	b.repMin, _ = quantile(s.Replicas, 0)
	b.repMax, _ = quantile(s.Replicas, 1)
	b.usageSteps = n
	if n == 0 || math.IsNaN(b.memMax) || math.IsNaN(b.repMax) {
		return b, fmt.Errorf("%s: no CPU, memory or replicas recorded to bound the manifest with", s.Name)
	}
	lo, hi := math.Max(1, math.Round(b.repMin)), math.Round(b.repMax)
	if fused != nil && len(fused.Points) > 0 {
		b.fusedReplayed = true
		b.fusedMin, b.fusedMax = math.MaxInt32, 0
		for _, p := range fused.Points {
			b.fusedMin, b.fusedMax = min(b.fusedMin, p.Replicas), max(b.fusedMax, p.Replicas)
		}
		lo, hi = math.Min(lo, math.Max(1, float64(b.fusedMin))), math.Max(hi, float64(b.fusedMax))
	}
	b.MinReplicas = int32(lo)
	b.MaxReplicas = max(int32(math.Ceil(mpaCeiling*hi)), b.MinReplicas+1)
	b.MinCPU = math.Max(mpaMinCPU, mpaCPUFloorShare*b.cpuP5)
	b.MaxCPU = math.Max(b.MinCPU, mpaCeiling*b.cpuP99)
	b.MinMemory = math.Max(mpaMinMemory, mpaMemoryFloorShare*b.memP5)
	b.MaxMemory = math.Max(b.MinMemory, mpaCeiling*b.memMax)
	return b, nil
}

// cpuQuantity rounds cores to whole millicores (up for a maximum).
func cpuQuantity(cores float64, up bool) resource.Quantity {
	m := cores * 1000
	if up {
		m = math.Ceil(m)
	} else {
		m = math.Max(1, math.Floor(m))
	}
	return *resource.NewMilliQuantity(int64(m), resource.DecimalSI)
}

// memoryQuantity rounds bytes to whole MiB (up for a maximum), which
// prints as "NNNMi".
func memoryQuantity(bytes float64, up bool) resource.Quantity {
	mi := bytes / (1 << 20)
	if up {
		mi = math.Ceil(mi)
	} else {
		mi = math.Max(1, math.Floor(mi))
	}
	return *resource.NewQuantity(int64(mi)<<20, resource.BinarySI)
}

// whatifMPA builds the manifest of target t from its bounds.
func whatifMPA(t whatifTarget, b mpaBounds, mode v1alpha1.UpdateMode) *v1alpha1.MultidimPodAutoscaler {
	minR, maxR := b.MinReplicas, b.MaxReplicas
	m := &v1alpha1.MultidimPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "MultidimPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: t.Deployment, Namespace: t.Namespace},
		Spec: v1alpha1.MultidimPodAutoscalerSpec{
			ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: t.Deployment},
			Policy:         &v1alpha1.PodUpdatePolicy{UpdateMode: &mode},
			Constraints: &v1alpha1.ScalingConstraints{
				Global: &v1alpha1.HorizontalScalingConstraints{MinReplicas: &minR, MaxReplicas: &maxR},
			},
			ResourcePolicy: &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{
				ContainerName: t.Container,
				MinAllowed:    corev1.ResourceList{corev1.ResourceCPU: cpuQuantity(b.MinCPU, false), corev1.ResourceMemory: memoryQuantity(b.MinMemory, false)},
				MaxAllowed:    corev1.ResourceList{corev1.ResourceCPU: cpuQuantity(b.MaxCPU, true), corev1.ResourceMemory: memoryQuantity(b.MaxMemory, true)},
			}}},
		},
	}
	return m
}

// mpaYAML renders m without its empty status and creation time, after a
// comment saying how its bounds were derived.
func mpaYAML(m *v1alpha1.MultidimPodAutoscaler, b mpaBounds, s *whatif.Series) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	body, err := yaml.Marshal(u)
	if err != nil {
		return nil, err
	}
	var h strings.Builder
	fmt.Fprintf(&h, "# Written by `recommender whatif` from %s of history of %s (step %s, from %s).\n",
		s.Duration(), s.Name, s.Step, s.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(&h, "# updateMode %s: ", *m.Spec.Policy.UpdateMode)
	if *m.Spec.Policy.UpdateMode == v1alpha1.UpdateModeOff {
		h.WriteString("AWARE recommends (kubectl describe mpa) and changes nothing;\n# set it to Auto or InPlace once the recommendations look right.\n")
	} else {
		h.WriteString("AWARE resizes the workload once this is applied.\n")
	}
	fused := "the fused default was not replayed"
	if b.fusedReplayed {
		fused = fmt.Sprintf("the fused default's replay ran %d to %d", b.fusedMin, b.fusedMax)
	}
	fmt.Fprintf(&h, "# Replicas: the history ran %g to %g, %s;\n#   minReplicas is the fewest (at least 1), maxReplicas %g× the most.\n", b.repMin, b.repMax, fused, mpaCeiling)
	fmt.Fprintf(&h, "# CPU per pod used %.3g cores (5th percentile) to %.3g (99th) over %d steps:\n#   minAllowed %g× the former (at least %gm), maxAllowed %g× the latter.\n",
		b.cpuP5, b.cpuP99, b.usageSteps, mpaCPUFloorShare, mpaMinCPU*1000, mpaCeiling)
	fmt.Fprintf(&h, "# Working set per pod %.0f MiB (5th percentile) to %.0f MiB (maximum):\n#   minAllowed %g× the former (at least %d MiB), maxAllowed %g× the latter.\n",
		b.memP5/(1<<20), b.memMax/(1<<20), mpaMemoryFloorShare, mpaMinMemory>>20, mpaCeiling)
	h.WriteString("# Usage is per pod, summed over its containers; the bounds go to the first container.\n")
	return append([]byte(h.String()), body...), nil
}

// writeMPA writes the manifest of one replayed workload into dir and
// returns its path.
func writeMPA(dir string, t whatifTarget, s *whatif.Series, fused *eval.Series, mode v1alpha1.UpdateMode) (string, error) {
	b, err := deriveBounds(s, fused)
	if err != nil {
		return "", err
	}
	out, err := mpaYAML(whatifMPA(t, b, mode), b, s)
	if err != nil {
		return "", fmt.Errorf("%s: rendering the manifest: %w", s.Name, err)
	}
	path := filepath.Join(dir, MPAFile(s.Name))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
