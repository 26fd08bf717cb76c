package server

// Conversion from the wire contract (proto/aware/rlagent/v1) to the domain
// types (pkg/workload, pkg/learn). pkg/agent, the recommender's side,
// exports the conversions towards the wire, which the responses use; it
// has none for requests (its FromRecommendation judges an agent's answer,
// not a recommender's request), so those live here.
//
// Everything from the wire is checked before it reaches the agent: NaN,
// ±Inf and negative numbers, missing required messages and fields, unknown
// enum values. Every problem is reported at once, each naming its field by
// its proto path (e.g. "observation.containers[0].usage.cpu_cores"), so a
// client author can fix a request in one round trip.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aware-k8s/aware/pkg/fusion"
	"github.com/aware-k8s/aware/pkg/learn"
	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/workload"
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

// path is a field path such as "observation.containers[0].usage.cpu_cores",
// kept as a chain of levels on the callers' stacks: each level points to
// its parent, an argument or local of a caller that outlives it. Nothing is
// built or allocated unless a violation names the path (the conversion is
// on the path of every call), and a level costs four words of stack; a
// whole array of levels per value, copied at every call, made the
// conversion's frames kilobytes deep and grew every call's stack. A path
// must not be stored beyond the call that received it, nor assigned to the
// variable it was derived from (p = p.dot(...) would point at itself).
type path struct {
	parent *path
	name   string
	index  int // -1: not indexed
}

func root(name string) path { return path{name: name, index: -1} }

// dot is p.name.
func (p *path) dot(name string) path { return path{parent: p, name: name, index: -1} }

// elem is p.name[i].
func (p *path) elem(name string, i int) path { return path{parent: p, name: name, index: i} }

func (p *path) String() string {
	var b strings.Builder
	p.write(&b)
	return b.String()
}

// write renders the parents first. It stores no level anywhere, so the
// levels stay on the stack.
func (p *path) write(b *strings.Builder) {
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

// checker accumulates violations.
type checker struct{ v []FieldViolation }

func (c *checker) add(field path, format string, args ...any) {
	c.v = append(c.v, FieldViolation{Field: field.String(), Description: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.v) == 0 {
		return nil
	}
	return &InvalidRequestError{Violations: c.v}
}

// number checks that x is finite and non-negative.
func (c *checker) number(field path, x float64) float64 {
	switch {
	case math.IsNaN(x):
		c.add(field, "must be a number, got NaN")
	case math.IsInf(x, 0):
		c.add(field, "must be finite, got %v", x)
	case x < 0:
		c.add(field, "must be >= 0, got %v", x)
	}
	return x
}

// share checks that x is a share of a window: in [0, 1]. Beyond 1 is
// malformed rather than out of bounds (bounds.go) because no measurement of
// a share can give it, as config.alpha beyond 1 is no weight; it is refused
// here so that every observation the conversion accepts passes
// workload.Observation.Validate.
func (c *checker) share(field path, x float64) float64 {
	switch {
	case math.IsNaN(x):
		c.add(field, "must be a number, got NaN")
	case x < 0 || x > 1:
		c.add(field, "must be in [0, 1], got %v", x)
	}
	return x
}

func (c *checker) count(field path, n int32) int32 {
	if n < 0 {
		c.add(field, "must be >= 0, got %d", n)
	}
	return n
}

func (c *checker) required(field path, present bool) bool {
	if !present {
		c.add(field, "is required")
	}
	return present
}

func (c *checker) resources(field path, r *pb.Resources) workload.Resources {
	// An absent Resources message means "unset", which the contract spells 0.
	return workload.Resources{
		CPU:    c.number(field.dot("cpu_cores"), r.GetCpuCores()),
		Memory: c.number(field.dot("memory_bytes"), r.GetMemoryBytes()),
	}
}

// maxNameLength is Kubernetes' limit on object names.
const maxNameLength = 253

func (c *checker) name(field path, s string) string {
	switch {
	case s == "":
		c.add(field, "is required")
	case len(s) > maxNameLength:
		c.add(field, "must be at most %d characters", maxNameLength)
	case strings.ContainsAny(s, "/\x00"):
		c.add(field, "must not contain '/' or NUL")
	}
	return s
}

// workloadKey identifies a workload's agent. The uid is part of it so that
// a re-created object with the same name starts afresh.
func (c *checker) workloadKey(field path, ref *pb.WorkloadRef) string {
	if !c.required(field, ref != nil) {
		return ""
	}
	ns := c.name(field.dot("namespace"), ref.GetNamespace())
	n := c.name(field.dot("name"), ref.GetName())
	uid := ref.GetUid()
	if strings.ContainsAny(uid, "/\x00") || len(uid) > maxNameLength {
		c.add(field.dot("uid"), "must be at most %d characters without '/' or NUL", maxNameLength)
	}
	return ns + "/" + n + "/" + uid
}

// maxScannedContainers is the most containers checked for duplicate names
// by a scan rather than a map.
const maxScannedContainers = 16

func (c *checker) observation(field path, o *pb.Observation) workload.Observation {
	var out workload.Observation
	if !c.required(field, o != nil) {
		return out
	}
	if c.required(field.dot("time"), o.GetTime() != nil) {
		if err := o.GetTime().CheckValid(); err != nil {
			c.add(field.dot("time"), "%v", err)
		} else {
			out.Time = o.GetTime().AsTime()
		}
	}
	if w := o.GetWindow(); w != nil {
		if err := w.CheckValid(); err != nil {
			c.add(field.dot("window"), "%v", err)
		} else if out.Window = w.AsDuration(); out.Window < 0 {
			c.add(field.dot("window"), "must be >= 0, got %v", out.Window)
		}
	}
	out.Replicas = c.count(field.dot("replicas"), o.GetReplicas())
	out.ReadyReplicas = c.count(field.dot("ready_replicas"), o.GetReadyReplicas())
	out.RequestRate = c.number(field.dot("request_rate"), o.GetRequestRate())
	out.ErrorRate = c.number(field.dot("error_rate"), o.GetErrorRate())
	out.SLO = c.number(field.dot("slo_seconds"), o.GetSloSeconds())
	lat := field.dot("latency")
	out.Latency = workload.Latency{
		P50: c.number(lat.dot("p50_seconds"), o.GetLatency().GetP50Seconds()),
		P95: c.number(lat.dot("p95_seconds"), o.GetLatency().GetP95Seconds()),
		P99: c.number(lat.dot("p99_seconds"), o.GetLatency().GetP99Seconds()),
	}
	out.Samples = int(c.count(field.dot("samples"), o.GetSamples()))
	if len(o.GetContainers()) == 0 {
		c.add(field.dot("containers"), "must list at least one container")
	}
	var seen map[string]bool // only for many containers; see below
	if n := len(o.GetContainers()); n > 0 {
		out.Containers = make([]workload.ContainerObservation, 0, n)
		if n > maxScannedContainers {
			seen = make(map[string]bool, n)
		}
	}
	for i, ct := range o.GetContainers() {
		f := field.elem("containers", i)
		if ct == nil {
			c.add(f, "is required")
			continue
		}
		n := c.name(f.dot("name"), ct.GetName())
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
			c.add(f.dot("name"), "duplicate container %q", n)
		}
		out.Containers = append(out.Containers, workload.ContainerObservation{
			Name:        n,
			Requests:    c.resources(f.dot("requests"), ct.GetRequests()),
			Limits:      c.resources(f.dot("limits"), ct.GetLimits()),
			Usage:       c.resources(f.dot("usage"), ct.GetUsage()),
			Peak:        c.resources(f.dot("peak"), ct.GetPeak()),
			OOMKills:    int(c.count(f.dot("oom_kills"), ct.GetOomKills())),
			CPUPressure: c.share(f.dot("cpu_pressure"), ct.GetCpuPressure()),
		})
	}
	return out
}

func (c *checker) constraints(field path, in *pb.Constraints) workload.Constraints {
	// Absent constraints mean none: any replica count >= 1, every container
	// in mode Auto without bounds.
	out := workload.Constraints{
		MinReplicas: c.count(field.dot("min_replicas"), in.GetMinReplicas()),
		MaxReplicas: c.count(field.dot("max_replicas"), in.GetMaxReplicas()),
	}
	if out.MaxReplicas > 0 && out.MinReplicas > out.MaxReplicas {
		c.add(field.dot("min_replicas"), "must not exceed max_replicas (%d > %d)", out.MinReplicas, out.MaxReplicas)
	}
	for i, p := range in.GetContainers() {
		f := field.elem("containers", i)
		if p == nil {
			c.add(f, "is required")
			continue
		}
		cp := workload.ContainerPolicy{
			Name:       c.name(f.dot("name"), p.GetName()),
			MinAllowed: c.resources(f.dot("min_allowed"), p.GetMinAllowed()),
			MaxAllowed: c.resources(f.dot("max_allowed"), p.GetMaxAllowed()),
		}
		switch p.GetMode() {
		case pb.ContainerMode_CONTAINER_MODE_UNSPECIFIED, pb.ContainerMode_CONTAINER_MODE_AUTO:
			cp.Mode = workload.ContainerModeAuto
		case pb.ContainerMode_CONTAINER_MODE_OFF:
			cp.Mode = workload.ContainerModeOff
		default:
			c.add(f.dot("mode"), "unknown value %d", p.GetMode())
		}
		switch p.GetControlledValues() {
		case pb.ControlledValues_CONTROLLED_VALUES_UNSPECIFIED, pb.ControlledValues_CONTROLLED_VALUES_REQUESTS_AND_LIMITS:
			cp.ControlledValues = workload.RequestsAndLimits
		case pb.ControlledValues_CONTROLLED_VALUES_REQUESTS_ONLY:
			cp.ControlledValues = workload.RequestsOnly
		default:
			c.add(f.dot("controlled_values"), "unknown value %d", p.GetControlledValues())
		}
		for j, r := range p.GetControlledResources() {
			switch r {
			case pb.Resource_RESOURCE_CPU:
				cp.ControlledResources = append(cp.ControlledResources, workload.CPU)
			case pb.Resource_RESOURCE_MEMORY:
				cp.ControlledResources = append(cp.ControlledResources, workload.Memory)
			default:
				c.add(f.elem("controlled_resources", j), "must be RESOURCE_CPU or RESOURCE_MEMORY, got %d", r)
			}
		}
		for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
			if lo, hi := cp.MinAllowed.Get(r), cp.MaxAllowed.Get(r); hi > 0 && lo > hi {
				c.add(f.dot("min_allowed"), "%s %v exceeds max_allowed %v", r, lo, hi)
			}
		}
		out.Containers = append(out.Containers, cp)
	}
	return out
}

func (c *checker) recommendation(field path, r *pb.Recommendation) workload.Recommendation {
	var out workload.Recommendation
	if !c.required(field, r != nil) {
		return out
	}
	out.Replicas = c.count(field.dot("replicas"), r.GetReplicas())
	for i, ct := range r.GetContainers() {
		f := field.elem("containers", i)
		if ct == nil {
			c.add(f, "is required")
			continue
		}
		out.Containers = append(out.Containers, workload.ContainerRecommendation{
			Name:       c.name(f.dot("name"), ct.GetName()),
			Target:     c.resources(f.dot("target"), ct.GetTarget()),
			LowerBound: c.resources(f.dot("lower_bound"), ct.GetLowerBound()),
			UpperBound: c.resources(f.dot("upper_bound"), ct.GetUpperBound()),
		})
	}
	return out
}

// config converts spec.rl. The recommender sends it with defaults applied;
// zero gates still fall back to the defaults (proto3 cannot tell 0 from
// unset), while alpha is taken literally because 0 is a meaningful weight.
// RL_MODE_UNSPECIFIED is Off, the CRD's default.
func (c *checker) config(field path, in *pb.Config) learn.Config {
	out := learn.Config{Alpha: in.GetAlpha()}
	if !c.required(field, in != nil) {
		return out
	}
	switch in.GetMode() {
	case pb.RLMode_RL_MODE_UNSPECIFIED, pb.RLMode_RL_MODE_OFF:
		out.Mode = learn.ModeOff
	case pb.RLMode_RL_MODE_SHADOW:
		out.Mode = learn.ModeShadow
	case pb.RLMode_RL_MODE_ON:
		out.Mode = learn.ModeOn
	default:
		c.add(field.dot("mode"), "unknown value %d", in.GetMode())
	}
	if a := in.GetAlpha(); math.IsNaN(a) || a < 0 || a > 1 {
		c.add(field.dot("alpha"), "must be in [0, 1], got %v", a)
	}
	g := in.GetGates()
	f := field.dot("gates")
	for _, v := range []struct {
		n string
		x float64
	}{
		{"promote_min_mean", g.GetPromoteMinMean()}, {"retrain_below_mean", g.GetRetrainBelowMean()},
	} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) {
			c.add(f.dot(v.n), "must be finite, got %v", v.x)
		}
	}
	out.Gates = lifecycle.Gates{
		Window:             int(c.count(f.dot("window"), g.GetWindow())),
		EpisodeSteps:       int(c.count(f.dot("episode_steps"), g.GetEpisodeSteps())),
		PromoteMinMean:     g.GetPromoteMinMean(),
		PromoteMaxStdDev:   c.number(f.dot("promote_max_std_dev"), g.GetPromoteMaxStdDev()),
		RetrainBelowMean:   g.GetRetrainBelowMean(),
		RetrainAboveStdDev: c.number(f.dot("retrain_above_std_dev"), g.GetRetrainAboveStdDev()),
	}.WithDefaults()
	if len(c.v) == 0 {
		if err := out.Gates.Validate(); err != nil {
			c.add(f, "%v", err)
		}
	}
	out.DefaultVariant = c.variant(field.dot("default_variant"), in.GetDefaultVariant())
	return out
}

// maxVariantLength bounds config.default_variant before it is parsed (and
// quoted in the error): a real variant is a few dozen characters.
const maxVariantLength = 128

// variant checks the fused default's variant the recommender computed its
// default with; "" is the fused default.
func (c *checker) variant(field path, s string) string {
	if len(s) > maxVariantLength {
		c.add(field, "must be at most %d characters", maxVariantLength)
		return s
	}
	if _, err := fusion.ParseVariant(s); err != nil {
		c.add(field, "%v", err)
	}
	return s
}

// recommendInput is a validated RecommendRequest.
type recommendInput struct {
	key         string
	obs         workload.Observation
	constraints workload.Constraints
	def         workload.Recommendation
	cfg         learn.Config
}

func fromRecommendRequest(r *pb.RecommendRequest) (recommendInput, error) {
	var c checker
	in := recommendInput{
		key:         c.workloadKey(root("workload"), r.GetWorkload()),
		obs:         c.observation(root("observation"), r.GetObservation()),
		constraints: c.constraints(root("constraints"), r.GetConstraints()),
		def:         c.recommendation(root("default_recommendation"), r.GetDefaultRecommendation()),
		cfg:         c.config(root("config"), r.GetConfig()),
	}
	return in, c.err()
}

// outcomeInput is a validated ReportOutcomeRequest.
type outcomeInput struct {
	key     string
	outcome learn.Outcome
}

func fromReportOutcomeRequest(r *pb.ReportOutcomeRequest) (outcomeInput, error) {
	var c checker
	in := outcomeInput{
		key: c.workloadKey(root("workload"), r.GetWorkload()),
		outcome: learn.Outcome{
			Observation: c.observation(root("observation"), r.GetObservation()),
			Applied:     c.recommendation(root("applied"), r.GetApplied()),
			Next:        c.observation(root("next_observation"), r.GetNextObservation()),
			Config:      c.config(root("config"), r.GetConfig()),
		},
	}
	switch r.GetAppliedSource() {
	case pb.Source_SOURCE_AGENT:
		in.outcome.AppliedSource = workload.SourceAgent
	case pb.Source_SOURCE_DEFAULT:
		in.outcome.AppliedSource = workload.SourceDefault
	case pb.Source_SOURCE_SAFEGUARD:
		in.outcome.AppliedSource = workload.SourceSafeguard
	default:
		c.add(root("applied_source"), "must be SOURCE_AGENT, SOURCE_DEFAULT or SOURCE_SAFEGUARD, got %d", r.GetAppliedSource())
	}
	return in, c.err()
}

func fromGetPolicyStatusRequest(r *pb.GetPolicyStatusRequest) (string, error) {
	var c checker
	key := c.workloadKey(root("workload"), r.GetWorkload())
	return key, c.err()
}

func toStage(s lifecycle.Stage) pb.Stage {
	switch s {
	case lifecycle.Bootstrapping:
		return pb.Stage_STAGE_BOOTSTRAPPING
	case lifecycle.OnlineTraining:
		return pb.Stage_STAGE_ONLINE_TRAINING
	case lifecycle.Serving:
		return pb.Stage_STAGE_SERVING
	case lifecycle.Retraining:
		return pb.Stage_STAGE_RETRAINING
	}
	return pb.Stage_STAGE_UNSPECIFIED
}

// refFromKey rebuilds a WorkloadRef from a key made by workloadKey.
func refFromKey(key string) *pb.WorkloadRef {
	parts := strings.SplitN(key, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return &pb.WorkloadRef{Namespace: parts[0], Name: parts[1], Uid: parts[2]}
}
