package usage

import (
	"context"
)

// ContainerKey names one container of one pod.
type ContainerKey struct {
	Namespace, Pod, Container string
}

// PressureReading is the CPU pressure of the containers Prometheus has a
// series for.
type PressureReading struct {
	// Containers maps each container with a usable value to its CPU
	// pressure over the window: the share of the window in which some of
	// its runnable work waited for CPU, in [0, 1]. A container without a
	// series (cgroup v1, a kubelet without PSI, a series younger than two
	// scrapes) or whose value was dropped is absent: not measured.
	Containers map[ContainerKey]float64
	// Dropped counts NaN, infinite and negative values discarded.
	Dropped Drops
}

// CPUPressure reads the CPU pressure (the cpuPressure template) of every
// container in namespace ("" = all) over the source's window. Values
// above 1 are brought down to 1: rate() extrapolates to the window's
// edges, and a container's old and new cgroups after a restart are
// summed, so a fully starved container can read a little above it; the
// share itself cannot exceed the window. No series is no error: the
// reading is empty. The error is non-nil only when Prometheus could not be
// asked or did not answer, and then nothing was read.
func (p *Prometheus) CPUPressure(ctx context.Context, namespace string) (PressureReading, error) {
	r := PressureReading{Containers: map[ContainerKey]float64{}, Dropped: Drops{}}
	if namespace != "" {
		if err := validNamespace(namespace); err != nil {
			return r, err
		}
	}
	q, err := p.Render(qCPUPressure, QueryData{Namespace: namespace, PodRegex: ".+", Window: Window(p.window)})
	if err != nil {
		return r, err
	}
	vec, err := p.instant(ctx, qCPUPressure, q)
	if err != nil {
		return r, err
	}
	for _, s := range vec {
		k := ContainerKey{string(s.Metric["namespace"]), string(s.Metric["pod"]), string(s.Metric["container"])}
		if k.Pod == "" || k.Container == "" {
			continue // not a container series; the template lost a label
		}
		x := float64(s.Value)
		if pr := problem(x); pr != "" {
			r.Dropped[pr]++
			continue
		}
		// Two series for one container (a template without an
		// aggregation) are read conservatively: the higher.
		r.Containers[k] = max(r.Containers[k], min(x, 1))
	}
	return r, nil
}
