// Package logic is the updater's pure decision core: given a model of one
// workload (its MPA's constraints and recommendation, the target's scale and
// its pods) and the current time, it decides what to change. Nothing here
// reads a clock or talks to an API server; the controller package turns API
// objects into this model (input), calls Decide, and executes the result.
// This is the VPA updater's input → model → logic split, with time passed in
// as in Knative's autoscaler, so every rule is testable without a cluster.
package logic

import (
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Container is one container of a running pod.
type Container struct {
	Name string
	// Requests and Limits are the pod spec's desired values (what a resize
	// last asked for, not necessarily what the kubelet has allocated).
	Requests workload.Resources
	Limits   workload.Resources
	// LastOOMKill is when the container last terminated with OOMKilled;
	// zero if it never did (as far as the pod status tells).
	LastOOMKill time.Time
	// Boost is set while the container runs with the CPU start-up boost
	// the admission controller gave it.
	Boost *Boost
}

// Boost is what a boosted container gets back when its boost ends, if its
// CPU is not sized by the recommendation: its unboosted CPU request and
// limit, in cores (a zero limit is none).
type Boost struct {
	Request, Limit float64
}

// ResizeState is where a pod's in-place resize stands, from its
// PodResizePending and PodResizeInProgress conditions.
type ResizeState string

const (
	ResizeNone       ResizeState = ""
	ResizeDeferred   ResizeState = "Deferred"
	ResizeInfeasible ResizeState = "Infeasible"
	ResizeInProgress ResizeState = "InProgress"
)

// Pod is one pod of a workload.
type Pod struct {
	Name string
	// Started is when the pod started (status.startTime), or its creation.
	Started time.Time
	// ReadySince is when the pod last became Ready; zero while it is not.
	ReadySince time.Time
	// Alive: running, ready and not being deleted. Only alive pods count
	// towards the minimum of live replicas.
	Alive bool
	// Terminating: the pod has a deletion timestamp (e.g. evicted earlier).
	Terminating bool
	// Unschedulable: the scheduler found no node for the pod (PodScheduled
	// False, reason Unschedulable).
	Unschedulable bool
	Containers    []Container
	Resize        ResizeState
	// ResizeSince is when the resize condition last transitioned.
	ResizeSince time.Time
	// ResizeMessage is the kubelet's (or the API server's) word on an
	// infeasible resize, for the ResizeInfeasible condition.
	ResizeMessage string
	// Refused is the resize the API server refused for this pod (Resize
	// is then ResizeInfeasible); nil when the kubelet reported the
	// infeasibility, whose request the pod spec already holds.
	Refused []ContainerResources
}

// Workload is everything the decision needs about one MPA and its target.
type Workload struct {
	// Key identifies the MPA (namespace/name) in reasons and logs.
	Key         string
	Mode        v1alpha1.UpdateMode
	Constraints workload.Constraints
	// Recommendation and HasRecommendation come from mpa.Recommendation.
	Recommendation    workload.Recommendation
	HasRecommendation bool
	// RecommendationTime is status.recommendationTime; zero when unset,
	// which the staleness guard treats as stale.
	RecommendationTime time.Time
	// Replicas is the target's configured replica count (/scale spec).
	Replicas int32
	Pods     []Pod
}

// SkipReason says why something was not done; it labels metrics and
// events, so the set is closed and CamelCase.
type SkipReason string

const (
	SkipNoRecommendation    SkipReason = hpa.ReasonNoRecommendation
	SkipStaleRecommendation SkipReason = "StaleRecommendation"
	SkipUpdateModeOff       SkipReason = "UpdateModeOff"
	SkipScalingDisabled     SkipReason = hpa.ReasonScalingDisabled
	SkipAdmissionStale      SkipReason = "AdmissionHeartbeatStale"
	SkipMinReplicas         SkipReason = "MinReplicas"
	SkipGlobalRateLimit     SkipReason = "GlobalRateLimit"
	SkipWorkloadRateLimit   SkipReason = "WorkloadRateLimit"
	SkipResizeInProgress    SkipReason = "ResizeInProgress"
	SkipResizePending       SkipReason = "ResizePending"
	SkipInvalidConstraints  SkipReason = "InvalidConstraints"
	// SkipAmbiguousTarget: an older autoscaler of the same target governs
	// it (mpa.Shadowed).
	SkipAmbiguousTarget SkipReason = "AmbiguousTarget"
	// SkipResizeRateLimit: the in-place resize budget is spent.
	SkipResizeRateLimit SkipReason = "ResizeRateLimit"
	// SkipRivalAutoscaler: another autoscaler (an HPA, KEDA, Knative)
	// owns the replica count (mpa.ReplicasLeftToRival).
	SkipRivalAutoscaler SkipReason = "RivalAutoscaler"
	// SkipResizeInfeasible: in InPlace mode, the pod's resize to the
	// current recommendation was found infeasible; it is sent again only
	// when the recommendation changes.
	SkipResizeInfeasible SkipReason = "ResizeInfeasible"
	// SkipStartupBoost: the pod runs with its CPU start-up boost, which
	// lasts until it is Ready and the boost's duration has passed.
	SkipStartupBoost SkipReason = "StartupBoost"
	// SkipEvictionDisabled: in InPlace mode a pod is never evicted.
	SkipEvictionDisabled SkipReason = "EvictionDisabled"
	// SkipUnschedulable: a pod of the workload waits for a node, so a
	// running pod is not evicted: its replacement, admitted with the
	// recommendation, would wait as well, and the workload would lose a
	// replica instead of resizing one.
	SkipUnschedulable SkipReason = "Unschedulable"
)

// RecommendationFresh is the staleness guard: a recommendation is usable
// only if it has a time and is at most maxAge old. A missing time is stale
// because nothing proves the recommender is still maintaining it.
func RecommendationFresh(now, at time.Time, maxAge time.Duration) bool {
	if at.IsZero() {
		return false
	}
	return now.Sub(at) <= maxAge
}
