package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// ResizeMode says how a vertical change reaches running pods.
type ResizeMode string

const (
	// ResizeRestart replaces outdated pods, at most MaxUnavailable of the
	// replicas at a time, like the VPA updater's evictions.
	ResizeRestart ResizeMode = "Restart"
	// ResizeInPlace resizes a pod without restarting it when its node has
	// room, and falls back to a restart otherwise.
	ResizeInPlace ResizeMode = "InPlace"
)

// Config describes the cluster and the knobs of the pod model.
type Config struct {
	// Step is the window between observations (default 15s, the HPA sync
	// period).
	Step time.Duration
	// Start is the simulated time of step 0; it only labels observations.
	Start time.Time
	// Nodes is the number of identical nodes (default 10).
	Nodes int
	// NodeCapacity is each node's allocatable (default 16 cores, 64 GiB).
	NodeCapacity workload.Resources
	// NodeCores is how many cores a node's pods may run on at once, which
	// the CFS quota model (App.CPUBurst) reads: more than the allocatable
	// where the system's reservations leave cores idle (default
	// NodeCapacity.CPU).
	NodeCores float64
	// NodeBackground is how many of a node's cores its other work keeps
	// busy on average (the control plane, system daemons, a load
	// generator), which the CFS quota model (App.CPUBurst) reads: every
	// request runs at 1/(1 + NodeBackground/NodeCores) of a core. Default
	// 0: the pods' requests have the cores to themselves. Off the cluster
	// a background of busy loops slows a 0.7-core pod's p95 about so
	// (docs/real-node-rounds.md, the quota probe).
	NodeBackground float64
	// NodeTick is a node's scheduler tick (1/CONFIG_HZ: 4ms at 250 Hz),
	// which the CFS quota model (App.CPUBurst) reads: the kernel finds a
	// quota spent only at a tick, so requests run on past it until then
	// and the overrun is taken off the next period's quota. Default 0: the
	// quota is enforced to the instant. Off the cluster, a 0.2-core pod's
	// p95 was 0.76x that model's (docs/real-node-rounds.md, the quota
	// probe). At most the CFS period (100ms).
	NodeTick time.Duration
	// Tenants is the fraction of each node's CPU beyond the app's requests
	// on it that other workloads request and use, every window (default 0:
	// the app runs alone). With 1 the nodes are packed and busy: a pod that
	// wants more than its request gets only its CFS share, its request. The
	// app's pods are scheduled as before (the others fill what they leave).
	// While a node's app pods together want no more than they request, they
	// keep their limits; beyond, each is cut to its share, which slows even
	// a pod within its request. So a policy that keeps usage within its
	// requests is barely affected; one that counts on capacity above them is.
	Tenants float64
	// Resize defaults to ResizeRestart.
	Resize ResizeMode
	// MaxUnavailable is the fraction of replicas a restart rollout may take
	// down at once (default 0.25; at least one pod).
	MaxUnavailable float64
	// Timeout is when a queued request gives up (default 30s).
	Timeout time.Duration
	// RateWindow is the period the policy's request rate, error rate and
	// latency percentiles cover, as a Prometheus rate() and
	// histogram_quantile over a range give them to the recommender
	// (its --prometheus-window): the observation pools the windows of the
	// last RateWindow (all of them until that many have run) and sets
	// Observation.RateWindow. Usage, replicas and the evaluator's
	// StepMetrics stay per window. 0, or not longer than Step: each
	// observation covers its own window, as before.
	RateWindow time.Duration
	// SampledLatency draws each window's latency percentiles as a sample
	// of its requests gives them (sampling.go): around the model's, with a
	// spread that grows as the window holds fewer requests and the pods run
	// busier. The observation's percentiles over RateWindow are read at the
	// windows' levels averaged by their samples (pooledLevels): they vary
	// less, and slowly, as consecutive ranges share most windows. Off: the
	// model's percentiles, as before (the demo, the evidence, training).
	SampledLatency bool
	// Unread are the observation's latency percentiles the policy does not
	// read: the simulator leaves them 0 in Observation.Latency and, with a
	// RateWindow, does not compute them (each is a quantile of the pooled
	// windows, most of a replay's CPU). Set it from the policy's own
	// declaration, workload.Unread(p).
	// Default none: all three computed. StepMetrics.Latency is always
	// whole, and the percentiles computed are the same, bit for bit,
	// whatever it holds.
	Unread workload.Percentiles
	// SampledUsage counts each pod's CPU usage as its window's realised
	// arrivals' work (PodInput.SampledUsage), as metrics-server's rate over
	// its resolution gives it: it varies around the mean with the Poisson
	// arrivals (a coefficient of variation of 1/√(λ·Step) at λ requests/s).
	// Off: the mean ρ·c in every calm window, as before (the demo, the
	// evidence, training).
	SampledUsage bool
	// UsageResolution is the period a pod's observed CPU usage is a rate
	// over, as metrics-server's resolution gives it to the HPA and the
	// recommender (--metric-resolution, 10s on the testbed). With
	// SampledUsage and a resolution shorter than Step, the usage a policy
	// sees counts only the arrivals of that part of the window (a binomial
	// thinning of the window's, by normal approximation, from a stream of
	// its own), so it varies as a shorter rate does: a coefficient of
	// variation of 1/√(λ·UsageResolution) rather than 1/√(λ·Step). The
	// cost and the evaluator's StepMetrics keep the window's usage. 0, or
	// not shorter than Step: the observation's usage is the window's.
	UsageResolution time.Duration
	// ReadyWithinWindow lets a pod serve from the moment it becomes Ready
	// (its start-up delay after it was scheduled) rather than from the next
	// window's start: in the window it becomes Ready, the arrivals after
	// that moment are shared with it (offers), and a policy's observation
	// at the window's end counts it Ready, as a kubelet's would. A pod
	// OOM-killed and Ready again within one window serves from the next.
	// Off: every pod is Ready from a window's start, as before (the demo,
	// the evidence, training), so a start-up delay shorter than Step costs
	// a whole window.
	ReadyWithinWindow bool
	// KeepHistory keeps every StepMetrics in memory (History).
	KeepHistory bool
}

// DefaultConfig returns the configuration the evaluator and demo use.
func DefaultConfig() Config {
	return Config{
		Step:           15 * time.Second,
		Start:          time.Date(2023, 7, 10, 0, 0, 0, 0, time.UTC),
		Nodes:          10,
		NodeCapacity:   workload.Resources{CPU: 16, Memory: 64 * gib},
		Resize:         ResizeRestart,
		MaxUnavailable: 0.25,
		Timeout:        30 * time.Second,
	}
}

// WithDefaults fills zero fields from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Step == 0 {
		c.Step = d.Step
	}
	if c.Start.IsZero() {
		c.Start = d.Start
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.NodeCapacity == (workload.Resources{}) {
		c.NodeCapacity = d.NodeCapacity
	}
	if c.NodeCores == 0 {
		c.NodeCores = c.NodeCapacity.CPU
	}
	if c.Resize == "" {
		c.Resize = d.Resize
	}
	if c.MaxUnavailable == 0 {
		c.MaxUnavailable = d.MaxUnavailable
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	return c
}

// Validate rejects configurations the model cannot run.
func (c Config) Validate() error {
	switch {
	case c.Step <= 0:
		return fmt.Errorf("step must be > 0, got %s", c.Step)
	case c.Nodes <= 0:
		return fmt.Errorf("nodes must be > 0, got %d", c.Nodes)
	case !(c.NodeCapacity.CPU > 0) || !(c.NodeCapacity.Memory > 0):
		return fmt.Errorf("node capacity must be positive, got %+v", c.NodeCapacity)
	case !(c.Tenants >= 0 && c.Tenants <= 1):
		return fmt.Errorf("tenants must be in [0, 1], got %g", c.Tenants)
	case c.Resize != ResizeRestart && c.Resize != ResizeInPlace:
		return fmt.Errorf("unknown resize mode %q", c.Resize)
	case !(c.MaxUnavailable > 0 && c.MaxUnavailable <= 1):
		return fmt.Errorf("maxUnavailable must be in (0, 1], got %g", c.MaxUnavailable)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be > 0, got %s", c.Timeout)
	case !(c.NodeCores >= 0) || math.IsInf(c.NodeCores, 0):
		return fmt.Errorf("nodeCores must be a finite number >= 0, got %g", c.NodeCores)
	case !(c.NodeBackground >= 0) || math.IsInf(c.NodeBackground, 0):
		return fmt.Errorf("nodeBackground must be a finite number of cores >= 0, got %g", c.NodeBackground)
	case c.NodeTick < 0 || c.NodeTick > time.Duration(cfsPeriod*float64(time.Second)):
		return fmt.Errorf("nodeTick must be from 0 to the CFS period of %v, got %v", time.Duration(cfsPeriod*float64(time.Second)), c.NodeTick)
	case c.RateWindow < 0:
		return fmt.Errorf("rate window must be >= 0, got %s", c.RateWindow)
	case c.UsageResolution < 0:
		return fmt.Errorf("usage resolution must be >= 0, got %s", c.UsageResolution)
	case c.Unread&^workload.AllPercentiles != 0:
		return fmt.Errorf("unread percentiles %#x: not a set of P50, P95 and P99", uint8(c.Unread))
	}
	return nil
}
