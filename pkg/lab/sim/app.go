package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

// SegmentClass groups profiles by the resource that bounds them.
type SegmentClass string

const (
	ClassCPU      SegmentClass = "cpu"
	ClassMemoryIO SegmentClass = "memory-io"
	ClassIdle     SegmentClass = "idle"
	ClassExternal SegmentClass = "external"
)

// Profile describes one function segment as distributions across
// applications: each parameter is log-normal with the given median and
// log-space standard deviation Spread.
type Profile struct {
	Name  string
	Class SegmentClass
	// CPUSeconds is the median CPU time one request spends in the segment.
	CPUSeconds float64
	// BaseMemory is the median resident memory of the segment's runtime.
	BaseMemory float64
	// MemoryPerRequest is the median memory each in-flight request holds.
	MemoryPerRequest float64
	// IOWait is the median time a request waits on I/O or a remote service,
	// during which it uses no CPU but still holds its memory.
	IOWait float64
	Spread float64
}

// Profiles returns the 16 segment profiles modelled on the function segments
// of AWARE's evaluation, in a fixed order.
func Profiles() []Profile {
	return []Profile{
		{Name: "float-loop", Class: ClassCPU, CPUSeconds: 0.080, BaseMemory: 40 * mib, MemoryPerRequest: 1 * mib, Spread: 0.4},
		{Name: "matrix-multiply", Class: ClassCPU, CPUSeconds: 0.250, BaseMemory: 80 * mib, MemoryPerRequest: 24 * mib, Spread: 0.4},
		{Name: "image-compress", Class: ClassCPU, CPUSeconds: 0.150, BaseMemory: 60 * mib, MemoryPerRequest: 12 * mib, IOWait: 0.010, Spread: 0.3},
		{Name: "image-resize", Class: ClassCPU, CPUSeconds: 0.100, BaseMemory: 60 * mib, MemoryPerRequest: 16 * mib, IOWait: 0.010, Spread: 0.3},
		{Name: "image-rotate", Class: ClassCPU, CPUSeconds: 0.070, BaseMemory: 60 * mib, MemoryPerRequest: 12 * mib, IOWait: 0.010, Spread: 0.3},
		{Name: "json-to-yaml", Class: ClassCPU, CPUSeconds: 0.020, BaseMemory: 30 * mib, MemoryPerRequest: 2 * mib, Spread: 0.3},
		{Name: "compress", Class: ClassCPU, CPUSeconds: 0.120, BaseMemory: 40 * mib, MemoryPerRequest: 8 * mib, IOWait: 0.005, Spread: 0.3},
		{Name: "decompress", Class: ClassCPU, CPUSeconds: 0.060, BaseMemory: 40 * mib, MemoryPerRequest: 8 * mib, IOWait: 0.005, Spread: 0.3},
		{Name: "write-file", Class: ClassMemoryIO, CPUSeconds: 0.010, BaseMemory: 30 * mib, MemoryPerRequest: 32 * mib, IOWait: 0.030, Spread: 0.3},
		{Name: "read-file", Class: ClassMemoryIO, CPUSeconds: 0.008, BaseMemory: 30 * mib, MemoryPerRequest: 48 * mib, IOWait: 0.020, Spread: 0.3},
		{Name: "sleep", Class: ClassIdle, CPUSeconds: 0.0005, BaseMemory: 20 * mib, MemoryPerRequest: 0.5 * mib, IOWait: 0.500, Spread: 0.2},
		{Name: "object-store-read", Class: ClassExternal, CPUSeconds: 0.005, BaseMemory: 40 * mib, MemoryPerRequest: 4 * mib, IOWait: 0.080, Spread: 0.4},
		{Name: "object-store-write", Class: ClassExternal, CPUSeconds: 0.006, BaseMemory: 40 * mib, MemoryPerRequest: 6 * mib, IOWait: 0.120, Spread: 0.4},
		{Name: "object-store-stream", Class: ClassExternal, CPUSeconds: 0.010, BaseMemory: 50 * mib, MemoryPerRequest: 16 * mib, IOWait: 0.250, Spread: 0.4},
		{Name: "kv-read", Class: ClassExternal, CPUSeconds: 0.002, BaseMemory: 30 * mib, MemoryPerRequest: 1 * mib, IOWait: 0.010, Spread: 0.4},
		{Name: "kv-write", Class: ClassExternal, CPUSeconds: 0.003, BaseMemory: 30 * mib, MemoryPerRequest: 1 * mib, IOWait: 0.020, Spread: 0.4},
	}
}

// Demand is what an app's requests and pods take of CPU and memory: the
// model's per-request and per-pod costs, apart from how the app is
// deployed and started (App).
type Demand struct {
	// CPUSeconds is the mean CPU time per request (core-seconds).
	CPUSeconds float64
	// IOWait is the mean non-CPU time per request (seconds).
	IOWait float64
	// CPUBurst models the CPU limit as the kernel enforces it (a CFS
	// quota over 100-ms periods) instead of as a fluid share: a request
	// runs at up to one core while the pod's quota lasts, then waits for
	// the next period. Its response time is then the CFS quota queue's
	// (cfs.go: an event-driven simulation of the pod in its stationary
	// state, read at p50 and p95); the fluid model (false, the default) is
	// an exponential of mean S/(1−ρ), S = CPUSeconds/limit. Against the
	// real node's windows of one pod (docs/real-node-rounds.md, round nineteen)
	// the real median p95 is 0.79–1.09× the quota queue's from 0.2 to 1 core;
	// against a time-stepped reference of the same queue the fluid model
	// is 1.35–9× too slow. It assumes requests of nearly constant CPU
	// time, as the real node's test app's are (for exponential ones the
	// fluid model is the closer).
	CPUBurst bool
	// CPUSecondsCV is the coefficient of variation of a request's CPU
	// time in the CFS quota model (CPUBurst): a request takes CPUSeconds
	// times a Gamma draw of mean 1 and this CV; 0 keeps every request at
	// CPUSeconds. The real node's test app burns a fixed thread CPU time,
	// but its windows' p95 spread as a sample of a queue whose work varies
	// (docs/real-node-rounds.md, the p95's spread at the floor's pod size),
	// where the constant-work queue's p95, nearly the CPU time at a pod of
	// 0.7 core, hardly moves.
	CPUSecondsCV float64
	// BaseCPU is the CPU a Ready pod uses with no requests (cores): its
	// runtime, probes and metric scrapes. It counts in the pod's usage and
	// takes its share of the CPU limit, so requests are served with the
	// rest. The real node's test app uses 15–17 millicores per pod so
	// (docs/real-node.md); 0, the default, leaves the model as before.
	BaseCPU float64
	// IdlePeriod, with CPUBurst, gives BaseCPU as one job of
	// BaseCPU·IdlePeriod CPU-seconds every IdlePeriod seconds, which
	// spends the pod's CFS quota as its requests do, as an exec readiness
	// probe's process does in the pod's cgroup; a burst larger than a CFS
	// period's quota holds the requests up for whole periods (the test
	// app's probe, measured on the node, is 10–11 ms every 2 s and too
	// small to: docs/real-node-rounds.md). 0, the default: BaseCPU spread evenly,
	// the limit less it serving the requests (ServingCPU). At least the
	// CFS period (0.1 s) when set.
	IdlePeriod float64
	// IdleBurst, with IdlePeriod, is each burst's CPU-seconds, at most
	// BaseCPU·IdlePeriod, the rest of BaseCPU spread evenly (an exec
	// probe's process takes 9 ms of CPU in its container's cgroup on the
	// machine of 2026-12-07, where the pods idle at 12–31 millicores);
	// 0: all of BaseCPU comes in the bursts.
	IdleBurst float64
	// BaseMemory is the working set of an idle pod (bytes).
	BaseMemory float64
	// MemoryPerRequest is the memory each in-flight request holds (bytes).
	MemoryPerRequest float64
	// ServesTimedOut models an app that serves every request it holds by
	// processor sharing, to the end, even after its client has given up,
	// as the real node's test app (and many servers) do. Once a pod is
	// overloaded (ρ > ρmax) or still holds such requests, its requests are
	// followed in one-second cohorts (held.go): every request held gets the
	// same CPU, so while their number grows hardly any finishes, a request
	// not answered within the timeout is lost to its client but keeps its
	// share of the CPU and its memory, and the pod answers nothing until
	// what it holds has drained. Against the discrete-event reference that
	// does the same, and against the real app (hack/memlag.sh), the fluid
	// backlog (false, the default) answers at capacity through an overload
	// instead (pasttimeout_test.go; docs/real-node-rounds.md, 2026-12-07).
	// It assumes requests of equal work, as the test app's are: with
	// varied work, processor sharing lets the short ones through.
	ServesTimedOut bool
	// HeldMemoryPerRequest is the working set each request in the held
	// queue (ServesTimedOut) adds, in bytes; 0: MemoryPerRequest. Under
	// a tight CPU quota most of the requests a pod holds in an overload
	// have not yet made their memory resident: the test app's working set
	// held 0.36 MiB per request in flight after 29 s at 1.8× what a 200m
	// quota serves, where a request that runs holds 1 MiB (hack/memlag.sh,
	// docs/real-node-rounds.md, round forty-three).
	HeldMemoryPerRequest float64
	// HeldQuantum, in CPU-seconds, serves the held queue (ServesTimedOut)
	// in turns instead of by processor sharing: each request held runs for
	// the quantum in its turn, in arrival order, then waits for the
	// others' turns (round robin). 0, the default, is the equal share; a
	// quantum of the whole request is first come, first served. The real
	// test app gives its requests turns of a few milliseconds (Go's run
	// queues), and so answers in an overload's first seconds half as many
	// again as an equal share does (docs/real-node-rounds.md, 2026-12-07).
	HeldQuantum float64
}

// App is one generated application: a single-container workload whose
// per-request behaviour is the sum of its segments.
type App struct {
	Name     string
	Segments []string
	// Container is the name of the workload's only container.
	Container string
	// Demand is what the app's requests and pods take of CPU and memory.
	Demand
	// StartupDelay is how long a scheduled pod takes to become Ready.
	StartupDelay time.Duration
	// StartupCPUShare is the share of StartupDelay that is CPU-bound at the
	// pod's request and shrinks in proportion under a CPU start-up boost
	// (the container policy's StartupBoost); 0, the default, means a boost
	// only costs.
	StartupCPUShare float64
	// SLO is the p95 latency objective (seconds).
	SLO float64
	// BaseRate is the app's mean arrival rate (requests/s); traces scale to it.
	BaseRate float64
	// Replicas, Requests and Limits are the user's initial deployment.
	Replicas    int32
	Requests    workload.Resources
	Limits      workload.Resources
	Constraints workload.Constraints

	sizing sizing
}

// Validate rejects apps the model cannot run.
func (a *App) Validate() error {
	switch {
	case a.Container == "":
		return fmt.Errorf("app %q: container name is empty", a.Name)
	case !(a.CPUSeconds > 0):
		return fmt.Errorf("app %q: cpuSeconds must be > 0, got %g", a.Name, a.CPUSeconds)
	case a.IOWait < 0 || a.BaseCPU < 0 || a.BaseMemory < 0 || a.MemoryPerRequest < 0 || a.BaseRate < 0 || a.SLO < 0 || a.HeldMemoryPerRequest < 0:
		return fmt.Errorf("app %q: negative parameter", a.Name)
	case !(a.IdlePeriod == 0 || a.IdlePeriod >= cfsPeriod) || math.IsInf(a.IdlePeriod, 0):
		return fmt.Errorf("app %q: idlePeriod must be 0 (idle CPU spread evenly) or a finite number of seconds >= the CFS period of %gs, got %g", a.Name, cfsPeriod, a.IdlePeriod)
	case !(a.IdleBurst >= 0) || math.IsInf(a.IdleBurst, 0):
		return fmt.Errorf("app %q: idleBurst must be a finite number of CPU-seconds >= 0, got %g", a.Name, a.IdleBurst)
	case !(a.HeldQuantum >= 0) || math.IsInf(a.HeldQuantum, 0):
		return fmt.Errorf("app %q: heldQuantum must be a finite number of CPU-seconds >= 0, got %g", a.Name, a.HeldQuantum)
	case a.HeldQuantum > 0 && a.HeldQuantum < a.CPUSeconds/64:
		// Turns that fine are processor sharing, at the cost of a turn
		// per cohort and 64 per request.
		return fmt.Errorf("app %q: heldQuantum %g is under a 64th of a request's %g CPU-seconds: use 0, processor sharing", a.Name, a.HeldQuantum, a.CPUSeconds)
	case a.StartupDelay < 0:
		return fmt.Errorf("app %q: negative start-up delay", a.Name)
	case !(a.CPUSecondsCV >= 0 && a.CPUSecondsCV <= maxCPUSecondsCV):
		return fmt.Errorf("app %q: cpuSecondsCV must be in [0, %g], got %g", a.Name, maxCPUSecondsCV, a.CPUSecondsCV)
	case !(a.StartupCPUShare >= 0 && a.StartupCPUShare <= 1):
		return fmt.Errorf("app %q: startupCPUShare must be in [0, 1], got %g", a.Name, a.StartupCPUShare)
	case a.Replicas < 0:
		return fmt.Errorf("app %q: negative replicas", a.Name)
	}
	if err := a.Requests.Valid(); err != nil {
		return fmt.Errorf("app %q requests: %w", a.Name, err)
	}
	if err := a.Limits.Valid(); err != nil {
		return fmt.Errorf("app %q limits: %w", a.Name, err)
	}
	if err := a.Constraints.Validate(); err != nil {
		return fmt.Errorf("app %q constraints: %w", a.Name, err)
	}
	return nil
}

// LimitRatio returns limit/request per resource; 0 means "no limit".
func (a *App) LimitRatio() workload.Resources {
	var r workload.Resources
	if a.Requests.CPU > 0 {
		r.CPU = a.Limits.CPU / a.Requests.CPU
	}
	if a.Requests.Memory > 0 {
		r.Memory = a.Limits.Memory / a.Requests.Memory
	}
	return r
}

// p95Factor is −ln(0.05): the p95 of an exponential in units of its mean.
var p95Factor = -math.Log(0.05)

// DefaultAppCount is the size of AWARE's generated app population.
const DefaultAppCount = 1000

// GenerateApps composes n apps of one to three segments each. Apps depend
// only on seed and their index, so GenerateApps(seed, 10) is a prefix of
// GenerateApps(seed, 1000).
func GenerateApps(seed uint64, n int) ([]App, error) {
	if n < 0 {
		return nil, fmt.Errorf("app count must be >= 0, got %d", n)
	}
	profiles := Profiles()
	apps := make([]App, n)
	for i := range apps {
		rng := rand.New(rand.NewPCG(seed, splitmix(uint64(i)+0x9e37)))
		apps[i] = generateApp(rng, i, profiles)
	}
	return apps, nil
}

func generateApp(rng *rand.Rand, i int, profiles []Profile) App {
	k := 1 + rng.IntN(3)
	a := App{Name: fmt.Sprintf("app-%04d", i), Container: "main"}
	for range k {
		p := profiles[rng.IntN(len(profiles))]
		a.Segments = append(a.Segments, p.Name)
		jitter := func(m float64) float64 { return m * math.Exp(p.Spread*rng.NormFloat64()) }
		a.CPUSeconds += jitter(p.CPUSeconds)
		a.IOWait += jitter(p.IOWait)
		// Segments run in one process: the runtime is shared, so base
		// memory is the largest segment's, not the sum.
		a.BaseMemory = max(a.BaseMemory, jitter(p.BaseMemory))
		a.MemoryPerRequest += jitter(p.MemoryPerRequest)
	}
	a.BaseMemory += 16 * mib // language runtime
	a.StartupDelay = time.Duration(5+rng.IntN(36)) * time.Second

	cpuReqs := []float64{0.25, 0.5, 1}
	a.Replicas = int32(1 + rng.IntN(3))
	a.Requests.CPU = cpuReqs[rng.IntN(len(cpuReqs))]
	a.Limits.CPU = a.Requests.CPU * []float64{1, 1.5, 2}[rng.IntN(3)]
	a.sizing.sloFactor = 1.5 + 1.5*rng.Float64()
	a.sizing.rho = 0.3 + 0.6*rng.Float64()
	a.sizing.memorySpare = 1.2 + rng.Float64()
	a.sizing.memoryLimitRatio = []float64{1, 1.25, 1.5}[rng.IntN(3)]
	a.size()

	a.Constraints = workload.Constraints{
		MinReplicas: 1,
		MaxReplicas: 30,
		Containers: []workload.ContainerPolicy{{
			Name:       "*",
			Mode:       workload.ContainerModeAuto,
			MinAllowed: workload.Resources{CPU: 0.01, Memory: 32 * mib},
			MaxAllowed: workload.Resources{CPU: 8, Memory: 16 * gib},
		}},
	}
	return a
}

// sizing holds the random choices that size an app's deployment from its
// per-request demand, so that an app given measured demand (WithMeasured)
// is sized by the same choices.
type sizing struct {
	// sloFactor is the SLO over the unloaded p95; rho the initial
	// deployment's mean utilisation of its CPU limits; memorySpare the
	// memory request over what the mean load's in-flight requests hold;
	// memoryLimitRatio the memory limit over the request.
	sloFactor, rho, memorySpare, memoryLimitRatio float64
}

// size derives the SLO, base rate and memory request and limit from the
// per-request demand, the replicas, the CPU limit and a.sizing.
func (a *App) size() {
	// The SLO is a multiple of the p95 an unloaded pod with the initial limit
	// achieves, so it is always reachable with enough capacity.
	unloaded := a.IOWait + p95Factor*a.CPUSeconds/a.Limits.CPU
	a.SLO = unloaded * a.sizing.sloFactor

	// Mean load puts the initial deployment at 30–90% of its CPU limits.
	a.BaseRate = min(max(a.sizing.rho*float64(a.Replicas)*a.Limits.CPU/a.CPUSeconds, 0.5), 400)
	a.sizeMemory()
}

// sizeMemory derives the memory request and limit from the base rate.
func (a *App) sizeMemory() {
	// The user sized memory for the in-flight requests of the mean load (at
	// least eight), with 20–120% to spare; peaks may still exceed it.
	a.Requests.Memory = roundUp((a.BaseMemory+math.Max(8, a.meanInFlight())*a.MemoryPerRequest)*a.sizing.memorySpare, 32*mib)
	a.Limits.Memory = a.Requests.Memory * a.sizing.memoryLimitRatio
}

// WithRate returns a copy of a deployed for a mean arrival rate of rate
// (requests/s) instead of its generated base rate: as many initial
// replicas (within the constraints) as put that load at the app's drawn
// utilisation of their CPU limits, and memory sized for it by the same
// choices. A replayed trace whose rate is its own (an Azure function's
// recorded invocations, a rate series) uses it, so that the user's
// deployment fits the load as the generated app's fits its base rate.
func (a App) WithRate(rate float64) App {
	rho := a.sizing.rho
	if rho <= 0 { // not a generated app: the middle of the drawn range
		rho = 0.6
	}
	n := math.Ceil(rate * a.CPUSeconds / (rho * a.Limits.CPU))
	lo, hi := float64(max(a.Constraints.MinReplicas, 1)), float64(math.MaxInt32)
	if a.Constraints.MaxReplicas > 0 { // 0: no bound
		hi = float64(max(a.Constraints.MaxReplicas, a.Constraints.MinReplicas, 1))
	}
	a.Replicas = int32(min(max(n, lo), hi))
	a.BaseRate = rate
	a.sizeMemory()
	return a
}

// meanInFlight is the requests one pod of the initial deployment holds on
// average at the base rate.
func (a *App) meanInFlight() float64 {
	perPod := a.BaseRate / float64(max(a.Replicas, 1))
	svc := a.CPUSeconds / a.Limits.CPU
	return perPod * (a.IOWait + svc/(1-math.Min(perPod*svc, rhoMax)))
}

// HeldOut reports whether app index i belongs to the held-out evaluation set
// (every fifth app); the rest are for training.
func HeldOut(i int) bool { return i%5 == 4 }

func roundUp(x, q float64) float64 { return math.Ceil(x/q) * q }

// splitmix scrambles a counter into a well-mixed 64-bit seed.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// SegmentClasses lists the segment classes in a fixed order.
func SegmentClasses() []SegmentClass {
	return []SegmentClass{ClassCPU, ClassMemoryIO, ClassIdle, ClassExternal}
}

// DominantClass returns the class whose segments take the largest share
// of a request's median time (the profiles' CPU time plus I/O wait, summed
// per class over the app's segments; the jitter of the generated app is
// not kept per segment), ties to the earlier class of SegmentClasses. It
// is "" when no segment is a known profile.
func (a *App) DominantClass() SegmentClass {
	share := map[SegmentClass]float64{}
	for _, s := range a.Segments {
		for _, p := range Profiles() {
			if p.Name == s {
				share[p.Class] += p.CPUSeconds + p.IOWait
			}
		}
	}
	var best SegmentClass
	for _, c := range SegmentClasses() {
		if v, ok := share[c]; ok && (best == "" || v > share[best]) {
			best = c
		}
	}
	return best
}
