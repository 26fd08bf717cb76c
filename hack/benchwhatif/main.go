// Command benchwhatif writes the history `make bench-whatif` backfills into
// Prometheus: WORKLOADS Deployments in one namespace, each scraped every
// STEP over DAYS days, as OpenMetrics text for
// `promtool tsdb create-blocks-from openmetrics`, with the series a cluster
// has and the what-if reads:
//
//   - cAdvisor's container_cpu_usage_seconds_total (a counter) and
//     container_memory_working_set_bytes, per pod and container;
//   - kube-state-metrics' kube_pod_container_resource_requests (cpu and
//     memory) per pod, and kube_deployment_status_replicas;
//   - the request counter http_request_duration_seconds_count of each
//     workload (label app), as an SLO histogram's _count.
//
// Each workload follows the simulator's model with its own CPU seconds per
// request, base memory and memory per request in flight, under a daily
// load with noise, and an HPA-like replica count (70% of the CPU request);
// a pod that goes away and comes back is a new pod with a new name, as a
// ReplicaSet makes it. The truth of each workload is written to
// workloads.json beside the OpenMetrics, for the benchmark to compare the
// fits with. Deterministic for a seed and end time.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/aware-k8s/aware/hack/benchwhatif/truth"
)

// nodeCPU is the capacity of a pod without a CPU limit, as the fit has it.
const nodeCPU = 16

func main() {
	out := flag.String("out", "", "Directory receiving history.om and workloads.json.")
	n := flag.Int("workloads", 100, "Number of Deployments.")
	days := flag.Float64("days", 7, "Days of history.")
	step := flag.Duration("step", time.Minute, "Scrape interval of every series.")
	end := flag.String("end", "", "Last sample's time (RFC 3339); empty: now, truncated to the step.")
	seed := flag.Uint64("seed", 1, "Seed of the workloads and their noise.")
	flag.Parse()
	if err := run(*out, *n, *days, *step, *end, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "benchwhatif:", err)
		os.Exit(1)
	}
}

func run(out string, n int, days float64, step time.Duration, endFlag string, seed uint64) error {
	if out == "" || n < 1 || days <= 0 || step < time.Second {
		return errors.New("need --out, --workloads ≥ 1, --days > 0 and --step ≥ 1s")
	}
	end := time.Now().Truncate(step)
	if endFlag != "" {
		t, err := time.Parse(time.RFC3339, endFlag)
		if err != nil {
			return fmt.Errorf("--end: %w", err)
		}
		end = t.Truncate(step)
	}
	samples := int(days * 24 * float64(time.Hour) / float64(step))
	start := end.Add(-time.Duration(samples-1) * step)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "history.om"))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	m := truth.Manifest{Namespace: truth.Namespace, Container: truth.Container, Metric: truth.Metric, Start: start, End: end, Step: step, Samples: samples}
	rng := rand.New(rand.NewPCG(seed, 0x77686174))
	for i := range n {
		wl := truth.Workload{
			Name:             fmt.Sprintf("w%03d", i),
			CPUSeconds:       0.002 + 0.048*rng.Float64(),
			IdleCPU:          0.005 + 0.02*rng.Float64(),
			BaseMemory:       float64(64+rng.IntN(448)) * (1 << 20),
			MemoryPerRequest: (0.25 + 2*rng.Float64()) * (1 << 20),
			MeanRate:         5 + 195*rng.Float64(),
			RequestCPU:       []float64{0.25, 0.5, 1}[rng.IntN(3)],
		}
		wl.RequestMemory = math.Ceil(2*wl.BaseMemory/(64<<20)) * (64 << 20)
		series, err := writeWorkload(w, wl, start, step, samples, rng.Uint64())
		if err != nil {
			return err
		}
		m.Series += series
		m.Workloads = append(m.Workloads, wl)
	}
	if _, err := w.WriteString("# EOF\n"); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "workloads.json"), append(js, '\n'), 0o644)
}

// pod is one incarnation of a replica slot: its series' samples are kept
// until it goes away, then written.
type pod struct {
	name       string
	from       int // first sample
	cpu, mem   []float64
	cumulative float64
}

// writeWorkload writes one workload's series and returns how many.
func writeWorkload(w *bufio.Writer, wl truth.Workload, start time.Time, step time.Duration, samples int, seed uint64) (int, error) {
	rng := rand.New(rand.NewPCG(seed, 0x706f64))
	dt := step.Seconds()
	hash := strconv.FormatUint(seed%(36*36*36*36*36), 36)
	phase := 2 * math.Pi * rng.Float64()
	const maxReplicas = 8
	slots := make([]*pod, maxReplicas)
	var done []*pod
	incarnations := 0
	replicas := make([]float64, samples)
	counter := make([]float64, samples)
	wants := make([]int, samples)
	stabilisation := max(1, int(5*time.Minute/step))
	var requests, noise float64
	for k := range samples {
		t := start.Add(time.Duration(k) * step)
		day := float64(t.Unix()%86400) / 86400
		// The load's noise is correlated over about ten minutes (AR(1),
		// a standard deviation of 10%), as a real service's is, not drawn
		// afresh every scrape.
		noise = 0.9*noise + 0.1*math.Sqrt(1-0.9*0.9)*rng.NormFloat64()
		rate := wl.MeanRate * (1 + 0.6*math.Sin(2*math.Pi*day+phase)) * (1 + noise)
		rate = math.Max(rate, 0.1)
		// The HPA's algorithm at 70% of the CPU request: desired =
		// ceil(current × usage/target), unchanged within its 10%
		// tolerance, and its five-minute scale-down stabilisation (the
		// most pods wanted over the last five minutes).
		prev := 2
		if k > 0 {
			prev = int(replicas[k-1])
		}
		ratio := (rate*wl.CPUSeconds/float64(prev) + wl.IdleCPU) / (0.7 * wl.RequestCPU)
		want := prev
		if math.Abs(ratio-1) > 0.1 {
			want = int(math.Ceil(float64(prev) * ratio))
		}
		wants[k] = min(max(want, 2), maxReplicas)
		r := slices.Max(wants[max(0, k-stabilisation+1) : k+1])
		replicas[k] = float64(r)
		requests += rate * dt
		counter[k] = math.Round(requests)
		perPod := rate / float64(r)
		// Without a CPU limit a pod may use the node; the fit assumes a
		// 16-core node then (docs/whatif.md), and so does this model.
		svc := wl.CPUSeconds / nodeCPU
		rho := math.Min(perPod*svc, 0.9)
		inflight := perPod * svc / (1 - rho)
		for s := range maxReplicas {
			if s >= r {
				if slots[s] != nil {
					done = append(done, slots[s])
					slots[s] = nil
				}
				continue
			}
			p := slots[s]
			if p == nil {
				incarnations++
				p = &pod{name: fmt.Sprintf("%s-%s-%05d", wl.Name, hash, incarnations), from: k}
				slots[s] = p
			}
			cpu := math.Max(0, wl.IdleCPU+perPod*wl.CPUSeconds*(1+0.05*rng.NormFloat64()))
			p.cumulative += cpu * dt
			p.cpu = append(p.cpu, p.cumulative)
			p.mem = append(p.mem, wl.BaseMemory+wl.MemoryPerRequest*inflight*(1+0.05*rng.NormFloat64()))
		}
	}
	for _, p := range slots {
		if p != nil {
			done = append(done, p)
		}
	}
	ts := func(k int) string {
		return strconv.FormatInt(start.Add(time.Duration(k)*step).Unix(), 10)
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	series := 0
	emit := func(labels string, from int, vals []float64) error {
		series++
		for i, v := range vals {
			if _, err := fmt.Fprintf(w, "%s %s %s\n", labels, num(v), ts(from+i)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, p := range done {
		pl := fmt.Sprintf(`namespace="%s",pod="%s",container="%s"`, truth.Namespace, p.name, truth.Container)
		if err := emit("container_cpu_usage_seconds_total{"+pl+"}", p.from, p.cpu); err != nil {
			return 0, err
		}
		if err := emit("container_memory_working_set_bytes{"+pl+"}", p.from, p.mem); err != nil {
			return 0, err
		}
		for _, res := range []struct {
			name string
			v    float64
		}{{"cpu", wl.RequestCPU}, {"memory", wl.RequestMemory}} {
			vals := make([]float64, len(p.cpu))
			for i := range vals {
				vals[i] = res.v
			}
			if err := emit(fmt.Sprintf(`kube_pod_container_resource_requests{%s,resource="%s"}`, pl, res.name), p.from, vals); err != nil {
				return 0, err
			}
		}
	}
	if err := emit(fmt.Sprintf(`kube_deployment_status_replicas{namespace="%s",deployment="%s"}`, truth.Namespace, wl.Name), 0, replicas); err != nil {
		return 0, err
	}
	if err := emit(fmt.Sprintf(`%s_count{namespace="%s",app="%s"}`, truth.Metric, truth.Namespace, wl.Name), 0, counter); err != nil {
		return 0, err
	}
	return series, nil
}
