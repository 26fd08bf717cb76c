// Package wire converts between the workload vocabulary (pkg/core/workload)
// and the RL agent contract's wire types (proto/aware/rlagent/v1), in both
// directions: the recommender's requests and the answers it reads back
// (convert.go), and the agent's side, which checks every request it
// receives (request.go).
//
// Everything from the wire is checked before it reaches the agent: NaN,
// ±Inf and negative numbers, missing required messages and fields, unknown
// enum values. Every problem is reported at once, each naming its field by
// its proto path (e.g. "observation.containers[0].usage.cpu_cores"), so a
// client author can fix a request in one round trip.
//
// The package imports neither the agent's server nor the learners, so that
// its fuzz targets link only the contract, the domain types and the
// protobuf runtime: the fuzzer's per-execution cost grows with the code
// linked into the test binary (docs/fuzzing.md).
package wire

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// ErrInvalidArgument marks a request that can never succeed as sent.
var ErrInvalidArgument = errors.New("invalid argument")

// FieldViolation is one problem with one field.
type FieldViolation struct {
	Field       string
	Description string
}

// InvalidRequestError lists every problem found in a request. It matches
// ErrInvalidArgument with errors.Is.
type InvalidRequestError struct {
	Violations []FieldViolation
}

func (e *InvalidRequestError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Field + ": " + v.Description
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidRequestError) Is(target error) bool { return target == ErrInvalidArgument }

// Path is a field path such as "observation.containers[0].usage.cpu_cores",
// kept as a chain of levels on the callers' stacks: each level points to
// its parent, an argument or local of a caller that outlives it. Nothing is
// built or allocated unless a violation names the path (the conversion is
// on the path of every call), and a level costs four words of stack; a
// whole array of levels per value, copied at every call, made the
// conversion's frames kilobytes deep and grew every call's stack. A path
// must not be stored beyond the call that received it, nor assigned to the
// variable it was derived from (p = p.Dot(...) would point at itself).
type Path struct {
	parent *Path
	name   string
	index  int // -1: not indexed
}

// Root is the path of a top-level field.
func Root(name string) Path { return Path{name: name, index: -1} }

// Dot is p.name.
func (p *Path) Dot(name string) Path { return Path{parent: p, name: name, index: -1} }

// Elem is p.name[i].
func (p *Path) Elem(name string, i int) Path { return Path{parent: p, name: name, index: i} }

func (p *Path) String() string {
	var b strings.Builder
	p.write(&b)
	return b.String()
}

// write renders the parents first. It stores no level anywhere, so the
// levels stay on the stack.
func (p *Path) write(b *strings.Builder) {
	if p.parent != nil {
		p.parent.write(b)
		b.WriteByte('.')
	}
	b.WriteString(p.name)
	if p.index >= 0 {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(p.index))
		b.WriteByte(']')
	}
}

// Checker accumulates violations. Its zero value is ready to use.
type Checker struct{ v []FieldViolation }

// Add records a violation of field.
func (c *Checker) Add(field Path, format string, args ...any) {
	c.v = append(c.v, FieldViolation{Field: field.String(), Description: fmt.Sprintf(format, args...)})
}

// Len is the number of violations recorded.
func (c *Checker) Len() int { return len(c.v) }

// Err is an *InvalidRequestError listing the violations, or nil.
func (c *Checker) Err() error {
	if len(c.v) == 0 {
		return nil
	}
	return &InvalidRequestError{Violations: c.v}
}

// number checks that x is finite and non-negative.
func (c *Checker) number(field Path, x float64) float64 {
	switch {
	case math.IsNaN(x):
		c.Add(field, "must be a number, got NaN")
	case math.IsInf(x, 0):
		c.Add(field, "must be finite, got %v", x)
	case x < 0:
		c.Add(field, "must be >= 0, got %v", x)
	}
	return x
}

// share checks that x is a share of a window: in [0, 1]. Beyond 1 is
// malformed rather than out of bounds (bounds.go) because no measurement of
// a share can give it, as config.alpha beyond 1 is no weight; it is refused
// here so that every observation the conversion accepts passes
// workload.Observation.Validate.
func (c *Checker) share(field Path, x float64) float64 {
	switch {
	case math.IsNaN(x):
		c.Add(field, "must be a number, got NaN")
	case x < 0 || x > 1:
		c.Add(field, "must be in [0, 1], got %v", x)
	}
	return x
}

func (c *Checker) count(field Path, n int32) int32 {
	if n < 0 {
		c.Add(field, "must be >= 0, got %d", n)
	}
	return n
}

func (c *Checker) required(field Path, present bool) bool {
	if !present {
		c.Add(field, "is required")
	}
	return present
}

func (c *Checker) resources(field Path, r *pb.Resources) workload.Resources {
	// An absent Resources message means "unset", which the contract spells 0.
	return workload.Resources{
		CPU:    c.number(field.Dot("cpu_cores"), r.GetCpuCores()),
		Memory: c.number(field.Dot("memory_bytes"), r.GetMemoryBytes()),
	}
}

// maxNameLength is Kubernetes' limit on object names.
const maxNameLength = 253

func (c *Checker) name(field Path, s string) string {
	switch {
	case s == "":
		c.Add(field, "is required")
	case len(s) > maxNameLength:
		c.Add(field, "must be at most %d characters", maxNameLength)
	case strings.ContainsAny(s, "/\x00"):
		c.Add(field, "must not contain '/' or NUL")
	}
	return s
}

// workloadKey identifies a workload's agent. The uid is part of it so that
// a re-created object with the same name starts afresh.
func (c *Checker) workloadKey(field Path, ref *pb.WorkloadRef) string {
	if !c.required(field, ref != nil) {
		return ""
	}
	ns := c.name(field.Dot("namespace"), ref.GetNamespace())
	n := c.name(field.Dot("name"), ref.GetName())
	uid := ref.GetUid()
	if strings.ContainsAny(uid, "/\x00") || len(uid) > maxNameLength {
		c.Add(field.Dot("uid"), "must be at most %d characters without '/' or NUL", maxNameLength)
	}
	return ns + "/" + n + "/" + uid
}

// maxScannedContainers is the most containers checked for duplicate names
// by a scan rather than a map.
const maxScannedContainers = 16

func (c *Checker) observation(field Path, o *pb.Observation) workload.Observation {
	var out workload.Observation
	if !c.required(field, o != nil) {
		return out
	}
	if c.required(field.Dot("time"), o.GetTime() != nil) {
		if err := o.GetTime().CheckValid(); err != nil {
			c.Add(field.Dot("time"), "%v", err)
		} else {
			out.Time = o.GetTime().AsTime()
		}
	}
	if w := o.GetWindow(); w != nil {
		if err := w.CheckValid(); err != nil {
			c.Add(field.Dot("window"), "%v", err)
		} else if out.Window = w.AsDuration(); out.Window < 0 {
			c.Add(field.Dot("window"), "must be >= 0, got %v", out.Window)
		}
	}
	if d := o.GetStartupDelay(); d != nil {
		if err := d.CheckValid(); err != nil {
			c.Add(field.Dot("startup_delay"), "%v", err)
		} else if out.StartupDelay = d.AsDuration(); out.StartupDelay < 0 {
			c.Add(field.Dot("startup_delay"), "must be >= 0, got %v", out.StartupDelay)
		}
	}
	out.Replicas = c.count(field.Dot("replicas"), o.GetReplicas())
	out.ReadyReplicas = c.count(field.Dot("ready_replicas"), o.GetReadyReplicas())
	out.RequestRate = c.number(field.Dot("request_rate"), o.GetRequestRate())
	out.ErrorRate = c.number(field.Dot("error_rate"), o.GetErrorRate())
	out.SLO = c.number(field.Dot("slo_seconds"), o.GetSloSeconds())
	lat := field.Dot("latency")
	out.Latency = workload.Latency{
		P50: c.number(lat.Dot("p50_seconds"), o.GetLatency().GetP50Seconds()),
		P95: c.number(lat.Dot("p95_seconds"), o.GetLatency().GetP95Seconds()),
		P99: c.number(lat.Dot("p99_seconds"), o.GetLatency().GetP99Seconds()),
	}
	out.Samples = int(c.count(field.Dot("samples"), o.GetSamples()))
	if len(o.GetContainers()) == 0 {
		c.Add(field.Dot("containers"), "must list at least one container")
	}
	var seen map[string]bool // only for many containers; see below
	if n := len(o.GetContainers()); n > 0 {
		out.Containers = make([]workload.ContainerObservation, 0, n)
		if n > maxScannedContainers {
			seen = make(map[string]bool, n)
		}
	}
	for i, ct := range o.GetContainers() {
		f := field.Elem("containers", i)
		if ct == nil {
			c.Add(f, "is required")
			continue
		}
		n := c.name(f.Dot("name"), ct.GetName())
		// Pods have a handful of containers, and a scan of those is cheaper
		// than a map on every call; a request listing many (bounded only by
		// the message size) gets the map, so it cannot cost quadratic time.
		dup := false
		if seen != nil {
			dup, seen[n] = seen[n], true
		} else {
			dup = slices.ContainsFunc(out.Containers, func(prev workload.ContainerObservation) bool { return prev.Name == n })
		}
		if dup && n != "" {
			c.Add(f.Dot("name"), "duplicate container %q", n)
		}
		out.Containers = append(out.Containers, workload.ContainerObservation{
			Name:        n,
			Requests:    c.resources(f.Dot("requests"), ct.GetRequests()),
			Limits:      c.resources(f.Dot("limits"), ct.GetLimits()),
			Usage:       c.resources(f.Dot("usage"), ct.GetUsage()),
			Peak:        c.resources(f.Dot("peak"), ct.GetPeak()),
			OOMKills:    int(c.count(f.Dot("oom_kills"), ct.GetOomKills())),
			CPUPressure: c.share(f.Dot("cpu_pressure"), ct.GetCpuPressure()),
		})
	}
	return out
}

func (c *Checker) constraints(field Path, in *pb.Constraints) workload.Constraints {
	// Absent constraints mean none: any replica count >= 1, every container
	// in mode Auto without bounds.
	out := workload.Constraints{
		MinReplicas: c.count(field.Dot("min_replicas"), in.GetMinReplicas()),
		MaxReplicas: c.count(field.Dot("max_replicas"), in.GetMaxReplicas()),
	}
	if out.MaxReplicas > 0 && out.MinReplicas > out.MaxReplicas {
		c.Add(field.Dot("min_replicas"), "must not exceed max_replicas (%d > %d)", out.MinReplicas, out.MaxReplicas)
	}
	for i, p := range in.GetContainers() {
		f := field.Elem("containers", i)
		if p == nil {
			c.Add(f, "is required")
			continue
		}
		cp := workload.ContainerPolicy{
			Name:       c.name(f.Dot("name"), p.GetName()),
			MinAllowed: c.resources(f.Dot("min_allowed"), p.GetMinAllowed()),
			MaxAllowed: c.resources(f.Dot("max_allowed"), p.GetMaxAllowed()),
		}
		switch p.GetMode() {
		case pb.ContainerMode_CONTAINER_MODE_UNSPECIFIED, pb.ContainerMode_CONTAINER_MODE_AUTO:
			cp.Mode = workload.ContainerModeAuto
		case pb.ContainerMode_CONTAINER_MODE_OFF:
			cp.Mode = workload.ContainerModeOff
		default:
			c.Add(f.Dot("mode"), "unknown value %d", p.GetMode())
		}
		switch p.GetControlledValues() {
		case pb.ControlledValues_CONTROLLED_VALUES_UNSPECIFIED, pb.ControlledValues_CONTROLLED_VALUES_REQUESTS_AND_LIMITS:
			cp.ControlledValues = workload.RequestsAndLimits
		case pb.ControlledValues_CONTROLLED_VALUES_REQUESTS_ONLY:
			cp.ControlledValues = workload.RequestsOnly
		default:
			c.Add(f.Dot("controlled_values"), "unknown value %d", p.GetControlledValues())
		}
		for j, r := range p.GetControlledResources() {
			switch r {
			case pb.Resource_RESOURCE_CPU:
				cp.ControlledResources = append(cp.ControlledResources, workload.CPU)
			case pb.Resource_RESOURCE_MEMORY:
				cp.ControlledResources = append(cp.ControlledResources, workload.Memory)
			default:
				c.Add(f.Elem("controlled_resources", j), "must be RESOURCE_CPU or RESOURCE_MEMORY, got %d", r)
			}
		}
		for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
			if lo, hi := cp.MinAllowed.Get(r), cp.MaxAllowed.Get(r); hi > 0 && lo > hi {
				c.Add(f.Dot("min_allowed"), "%s %v exceeds max_allowed %v", r, lo, hi)
			}
		}
		out.Containers = append(out.Containers, cp)
	}
	return out
}

func (c *Checker) recommendation(field Path, r *pb.Recommendation) workload.Recommendation {
	var out workload.Recommendation
	if !c.required(field, r != nil) {
		return out
	}
	out.Replicas = c.count(field.Dot("replicas"), r.GetReplicas())
	for i, ct := range r.GetContainers() {
		f := field.Elem("containers", i)
		if ct == nil {
			c.Add(f, "is required")
			continue
		}
		out.Containers = append(out.Containers, workload.ContainerRecommendation{
			Name:       c.name(f.Dot("name"), ct.GetName()),
			Target:     c.resources(f.Dot("target"), ct.GetTarget()),
			LowerBound: c.resources(f.Dot("lower_bound"), ct.GetLowerBound()),
			UpperBound: c.resources(f.Dot("upper_bound"), ct.GetUpperBound()),
		})
	}
	return out
}

// config converts spec.rl. The recommender sends it with defaults applied;
// zero gates still fall back to the defaults (proto3 cannot tell 0 from
// unset), while alpha is taken literally because 0 is a meaningful weight.
// RL_MODE_UNSPECIFIED is Off, the CRD's default.
func (c *Checker) config(field Path, in *pb.Config) workload.RLConfig {
	out := workload.RLConfig{Alpha: in.GetAlpha()}
	if !c.required(field, in != nil) {
		return out
	}
	switch in.GetMode() {
	case pb.RLMode_RL_MODE_UNSPECIFIED, pb.RLMode_RL_MODE_OFF:
		out.Mode = workload.RLModeOff
	case pb.RLMode_RL_MODE_SHADOW:
		out.Mode = workload.RLModeShadow
	case pb.RLMode_RL_MODE_ON:
		out.Mode = workload.RLModeOn
	default:
		c.Add(field.Dot("mode"), "unknown value %d", in.GetMode())
	}
	if a := in.GetAlpha(); math.IsNaN(a) || a < 0 || a > 1 {
		c.Add(field.Dot("alpha"), "must be in [0, 1], got %v", a)
	}
	g := in.GetGates()
	f := field.Dot("gates")
	for _, v := range []struct {
		n string
		x float64
	}{
		{"promote_min_mean", g.GetPromoteMinMean()}, {"retrain_below_mean", g.GetRetrainBelowMean()},
	} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) {
			c.Add(f.Dot(v.n), "must be finite, got %v", v.x)
		}
	}
	out.Gates = lifecycle.Gates{
		Window:             int(c.count(f.Dot("window"), g.GetWindow())),
		EpisodeSteps:       int(c.count(f.Dot("episode_steps"), g.GetEpisodeSteps())),
		PromoteMinMean:     g.GetPromoteMinMean(),
		PromoteMaxStdDev:   c.number(f.Dot("promote_max_std_dev"), g.GetPromoteMaxStdDev()),
		RetrainBelowMean:   g.GetRetrainBelowMean(),
		RetrainAboveStdDev: c.number(f.Dot("retrain_above_std_dev"), g.GetRetrainAboveStdDev()),
	}.WithDefaults()
	if len(c.v) == 0 {
		if err := out.Gates.Validate(); err != nil {
			c.Add(f, "%v", err)
		}
	}
	out.DefaultVariant = c.variant(field.Dot("default_variant"), in.GetDefaultVariant())
	return out
}

// maxVariantLength bounds config.default_variant before it is parsed (and
// quoted in the error): a real variant is a few dozen characters.
const maxVariantLength = 128

// variant checks the fused default's variant the recommender computed its
// default with; "" is the fused default.
func (c *Checker) variant(field Path, s string) string {
	if len(s) > maxVariantLength {
		c.Add(field, "must be at most %d characters", maxVariantLength)
		return s
	}
	if _, err := fusion.ParseVariant(s); err != nil {
		c.Add(field, "%v", err)
	}
	return s
}

// Recommend is a validated RecommendRequest.
type Recommend struct {
	// Key identifies the workload's agent (WorkloadKey).
	Key         string
	Observation workload.Observation
	Constraints workload.Constraints
	Default     workload.Recommendation
	Config      workload.RLConfig
}

// FromRecommend converts and checks r. The error, if any, is an
// *InvalidRequestError naming every violation.
func FromRecommend(r *pb.RecommendRequest) (Recommend, error) {
	var c Checker
	in := Recommend{
		Key:         c.workloadKey(Root("workload"), r.GetWorkload()),
		Observation: c.observation(Root("observation"), r.GetObservation()),
		Constraints: c.constraints(Root("constraints"), r.GetConstraints()),
		Default:     c.recommendation(Root("default_recommendation"), r.GetDefaultRecommendation()),
		Config:      c.config(Root("config"), r.GetConfig()),
	}
	return in, c.Err()
}

// Outcome is a validated ReportOutcomeRequest.
type Outcome struct {
	Key           string
	Observation   workload.Observation
	Applied       workload.Recommendation
	AppliedSource workload.Source
	Next          workload.Observation
	Config        workload.RLConfig
}

// FromReportOutcome converts and checks r, as FromRecommend.
func FromReportOutcome(r *pb.ReportOutcomeRequest) (Outcome, error) {
	var c Checker
	in := Outcome{
		Key:         c.workloadKey(Root("workload"), r.GetWorkload()),
		Observation: c.observation(Root("observation"), r.GetObservation()),
		Applied:     c.recommendation(Root("applied"), r.GetApplied()),
		Next:        c.observation(Root("next_observation"), r.GetNextObservation()),
		Config:      c.config(Root("config"), r.GetConfig()),
	}
	switch r.GetAppliedSource() {
	case pb.Source_SOURCE_AGENT:
		in.AppliedSource = workload.SourceAgent
	case pb.Source_SOURCE_DEFAULT:
		in.AppliedSource = workload.SourceDefault
	case pb.Source_SOURCE_SAFEGUARD:
		in.AppliedSource = workload.SourceSafeguard
	default:
		c.Add(Root("applied_source"), "must be SOURCE_AGENT, SOURCE_DEFAULT or SOURCE_SAFEGUARD, got %d", r.GetAppliedSource())
	}
	return in, c.Err()
}

// WorkloadKey checks the workload of a request that names only a
// workload (GetPolicyStatus, ForgetWorkload) and returns its key.
func WorkloadKey(ref *pb.WorkloadRef) (string, error) {
	var c Checker
	key := c.workloadKey(Root("workload"), ref)
	return key, c.Err()
}

// Ref rebuilds a WorkloadRef from a key that WorkloadKey made.
func Ref(key string) *pb.WorkloadRef {
	parts := strings.SplitN(key, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return &pb.WorkloadRef{Namespace: parts[0], Name: parts[1], Uid: parts[2]}
}
