package v1alpha1

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mpa,categories=all;autoscaling
// +kubebuilder:printcolumn:name="Mode",type="string",JSONPath=".spec.policy.updateMode"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.currentReplicas"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".status.desiredReplicas"
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.recommendation.containerRecommendations[0].target.cpu"
// +kubebuilder:printcolumn:name="Mem",type="string",JSONPath=".status.recommendation.containerRecommendations[0].target.memory"
// +kubebuilder:printcolumn:name="Stage",type="string",JSONPath=".status.rl.stage"
// +kubebuilder:printcolumn:name="Provided",type="string",JSONPath=".status.conditions[?(@.type=='RecommendationProvided')].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MultidimPodAutoscaler sizes a workload in both dimensions at once: the
// number of replicas and the CPU and memory of each container. A
// recommender writes the decision into status; the updater applies it to
// running pods and the target's scale; the admission controller applies it
// to new pods.
type MultidimPodAutoscaler struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for: the target, the goals and the bounds.
	Spec MultidimPodAutoscalerSpec `json:"spec"`

	// status is the most recent decision and the state of the autoscaler.
	// +optional
	Status MultidimPodAutoscalerStatus `json:"status,omitempty"`
}

// MultidimPodAutoscalerSpec is the specification of the autoscaler.
type MultidimPodAutoscalerSpec struct {
	// scaleTargetRef points to the controller that manages the pods, e.g. a
	// Deployment or StatefulSet. Any kind that implements the scale
	// subresource works: its selector finds the pods and its replicas field
	// is what horizontal scaling sets. An unusable target is reported with
	// the ConfigUnsupported condition.
	ScaleTargetRef *autoscalingv1.CrossVersionObjectReference `json:"scaleTargetRef"`

	// policy says how changes are applied to pods. If unset, updateMode is
	// Auto.
	// +optional
	// +kubebuilder:default={updateMode: Auto}
	Policy *PodUpdatePolicy `json:"policy,omitempty"`

	// goals are autoscaling/v2 metric specifications (Resource,
	// ContainerResource, Pods, Object, External). Each drives the replica
	// count with HPA semantics (the largest proposal wins, a missing metric
	// blocks scale-down) and is reported in status.currentMetrics. A
	// Resource cpu Utilization goal sets the fused default's CPU target
	// (70% without one); ContainerResource goals are reported only.
	// +optional
	Goals *Goals `json:"goals,omitempty"`

	// constraints bound horizontal and vertical scaling.
	// +optional
	Constraints *ScalingConstraints `json:"constraints,omitempty"`

	// resourcePolicy controls how per-container resources are computed
	// (the VPA PodResourcePolicy). Where it and constraints.container both
	// bound a container, the tighter bound applies.
	// +optional
	ResourcePolicy *PodResourcePolicy `json:"resourcePolicy,omitempty"`

	// recommenders names the recommender responsible for this object. Empty
	// means the default recommender; at most one may be named.
	// +optional
	// +kubebuilder:validation:MaxItems=1
	// +listType=atomic
	Recommenders []MultidimPodAutoscalerRecommenderSelector `json:"recommenders,omitempty"`

	// rl configures the AWARE reinforcement-learning agent for this
	// workload. If unset, the agent is off and the defaults decide.
	// +optional
	RL *RLSpec `json:"rl,omitempty"`
}

// UpdateMode controls when and how recommendations reach the pods.
// +kubebuilder:validation:Enum=Off;Initial;Recreate;InPlaceOrRecreate;InPlace;Auto
type UpdateMode string

const (
	// UpdateModeOff computes recommendations and applies nothing.
	UpdateModeOff UpdateMode = "Off"
	// UpdateModeInitial applies resources only when pods are created and
	// never scales horizontally.
	UpdateModeInitial UpdateMode = "Initial"
	// UpdateModeRecreate applies resources at pod creation and by evicting
	// running pods, and scales horizontally.
	UpdateModeRecreate UpdateMode = "Recreate"
	// UpdateModeInPlaceOrRecreate resizes running pods in place, falling
	// back to eviction, and scales horizontally.
	UpdateModeInPlaceOrRecreate UpdateMode = "InPlaceOrRecreate"
	// UpdateModeInPlace resizes running pods in place and never evicts
	// them: a resize the kubelet defers is left to the kubelet to retry,
	// and an infeasible one is reported in the ResizeInfeasible condition
	// and sent again only when the recommendation changes. It scales
	// horizontally.
	UpdateModeInPlace UpdateMode = "InPlace"
	// UpdateModeAuto is Recreate today; it may use in-place resize when the
	// cluster supports it in the future.
	UpdateModeAuto UpdateMode = "Auto"
)

// PodUpdatePolicy describes how changes are applied to pods.
type PodUpdatePolicy struct {
	// updateMode controls when the autoscaler applies changes: Off, Initial,
	// Recreate, InPlaceOrRecreate, InPlace or Auto (the default).
	// +optional
	// +kubebuilder:default=Auto
	UpdateMode *UpdateMode `json:"updateMode,omitempty"`
}

// Goals describe what horizontal scaling aims for.
type Goals struct {
	// metrics are the autoscaling/v2 metric specifications that drive the
	// replica count; their current values are reported in
	// status.currentMetrics.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// ScalingConstraints bound horizontal and vertical scaling.
type ScalingConstraints struct {
	// global bounds the replica count and how fast it may change.
	// +optional
	Global *HorizontalScalingConstraints `json:"global,omitempty"`

	// containerControlledResources lists the resources that vertical scaling
	// controls, for every container. Default: cpu and memory.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=cpu;memory
	ContainerControlledResources []corev1.ResourceName `json:"containerControlledResources,omitempty"`

	// container holds per-container bounds on requests.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Container []VerticalScalingConstraints `json:"container,omitempty"`
}

// HorizontalScalingConstraints bound the replica count.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must be less than or equal to maxReplicas"
type HorizontalScalingConstraints struct {
	// minReplicas is the lower limit for the number of replicas. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the upper limit for the number of replicas; it cannot
	// be smaller than minReplicas. If unset, the replica count is bounded by
	// 100 (or by minReplicas, if that is higher), and the ScalingLimited
	// condition says so.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// behavior configures scale-up and scale-down rates and stabilization
	// windows with HorizontalPodAutoscaler semantics.
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// VerticalScalingConstraints bound one container's requests.
type VerticalScalingConstraints struct {
	// name of the container; "*" applies to every container without its own
	// entry.
	// +optional
	Name string `json:"name,omitempty"`

	// mode is Auto (the default) or Off, which leaves the container alone.
	// +optional
	Mode *ContainerScalingMode `json:"mode,omitempty"`

	// requests bounds the recommended requests.
	// +optional
	Requests *MinMaxVerticalScalingLimits `json:"requests,omitempty"`
}

// MinMaxVerticalScalingLimits are lower and upper bounds on requests.
// +kubebuilder:validation:XValidation:rule="!has(self.minAllowed) || !has(self.maxAllowed) || self.minAllowed.all(r, !(r in self.maxAllowed) || quantity(string(self.minAllowed[r])).compareTo(quantity(string(self.maxAllowed[r]))) <= 0)",message="minAllowed must be less than or equal to maxAllowed for each resource"
type MinMaxVerticalScalingLimits struct {
	// minAllowed is the smallest request that will be recommended. Default:
	// no minimum.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=8
	MinAllowed corev1.ResourceList `json:"minAllowed,omitempty"`
	// maxAllowed is the largest request that will be recommended. Default:
	// no maximum.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=8
	MaxAllowed corev1.ResourceList `json:"maxAllowed,omitempty"`
}

// ContainerScalingMode says whether a container is sized.
// +kubebuilder:validation:Enum=Auto;Off
type ContainerScalingMode string

const (
	// ContainerScalingModeAuto sizes the container.
	ContainerScalingModeAuto ContainerScalingMode = "Auto"
	// ContainerScalingModeOff leaves the container's resources alone.
	ContainerScalingModeOff ContainerScalingMode = "Off"
)

// ContainerControlledValues says which of requests and limits are set.
// +kubebuilder:validation:Enum=RequestsAndLimits;RequestsOnly
type ContainerControlledValues string

const (
	// ContainerControlledValuesRequestsAndLimits sets requests and scales
	// limits in proportion, keeping the limit/request ratio.
	ContainerControlledValuesRequestsAndLimits ContainerControlledValues = "RequestsAndLimits"
	// ContainerControlledValuesRequestsOnly sets requests only.
	ContainerControlledValuesRequestsOnly ContainerControlledValues = "RequestsOnly"
)

// PodResourcePolicy controls how per-container resources are computed.
type PodResourcePolicy struct {
	// containerPolicies holds one policy per container name; "*" is the
	// default for containers without their own entry.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ContainerPolicies []ContainerResourcePolicy `json:"containerPolicies,omitempty"`
}

// ContainerResourcePolicy bounds and configures one container's sizing.
// +kubebuilder:validation:XValidation:rule="!has(self.minAllowed) || !has(self.maxAllowed) || self.minAllowed.all(r, !(r in self.maxAllowed) || quantity(string(self.minAllowed[r])).compareTo(quantity(string(self.maxAllowed[r]))) <= 0)",message="minAllowed must be less than or equal to maxAllowed for each resource"
type ContainerResourcePolicy struct {
	// containerName is the container the policy applies to, or "*" for every
	// container without its own policy.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
	// mode is Auto (the default) or Off.
	// +optional
	Mode *ContainerScalingMode `json:"mode,omitempty"`
	// minAllowed is the smallest request that will be recommended.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=8
	MinAllowed corev1.ResourceList `json:"minAllowed,omitempty"`
	// maxAllowed is the largest request that will be recommended.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=8
	MaxAllowed corev1.ResourceList `json:"maxAllowed,omitempty"`
	// controlledResources lists the resources that are sized. Default: cpu
	// and memory.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=cpu;memory
	ControlledResources *[]corev1.ResourceName `json:"controlledResources,omitempty"`
	// controlledValues is RequestsAndLimits (the default: limits scale with
	// requests) or RequestsOnly.
	// +optional
	ControlledValues *ContainerControlledValues `json:"controlledValues,omitempty"`
	// startupBoost gives the container more CPU while its pod starts: the
	// admission controller raises the CPU request (and the limit, keeping
	// the ratio, under RequestsAndLimits) of a new pod, and the updater
	// resizes it back in place once the pod is Ready and the boost's
	// duration has passed. It applies in the modes in which the updater
	// acts on running pods (Recreate, InPlaceOrRecreate, InPlace, Auto).
	// +optional
	StartupBoost *StartupBoost `json:"startupBoost,omitempty"`
}

// StartupBoost raises a container's resources while its pod starts.
type StartupBoost struct {
	// cpu boosts the CPU request and limit.
	// +optional
	CPU *CPUStartupBoost `json:"cpu,omitempty"`
}

// CPUStartupBoost sets a container's CPU during start-up: factor times the
// request the container would get without the boost (the recommendation,
// or the pod's own request), or value, or the larger of the two when both
// are set.
// +kubebuilder:validation:XValidation:rule="has(self.factor) || has(self.value)",message="startupBoost.cpu needs a factor or a value"
// +kubebuilder:validation:XValidation:rule="!has(self.factor) || self.factor >= 1.0",message="startupBoost.cpu.factor must be at least 1"
// +kubebuilder:validation:XValidation:rule="!has(self.value) || quantity(string(self.value)).isGreaterThan(quantity('0'))",message="startupBoost.cpu.value must be greater than zero"
type CPUStartupBoost struct {
	// factor multiplies the CPU request during start-up; at least 1, at
	// most 100.
	// +optional
	// +kubebuilder:validation:Maximum=100
	Factor *float64 `json:"factor,omitempty"`
	// value is the CPU request during start-up, e.g. "2"; greater than 0.
	// +optional
	Value *resource.Quantity `json:"value,omitempty"`
	// duration keeps the boost this long after the pod becomes Ready, e.g.
	// "30s". Default 0: the boost ends when the pod is Ready.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// MultidimPodAutoscalerRecommenderSelector names a recommender.
type MultidimPodAutoscalerRecommenderSelector struct {
	// name of the recommender responsible for this object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RLMode says how far the RL agent is trusted.
// +kubebuilder:validation:Enum=Off;Shadow;On
type RLMode string

const (
	// RLModeOff never calls the agent: the defaults decide.
	RLModeOff RLMode = "Off"
	// RLModeShadow lets the agent learn and recommend while the defaults
	// are applied.
	RLModeShadow RLMode = "Shadow"
	// RLModeOn applies the agent's recommendation once its stage allows it.
	RLModeOn RLMode = "On"
)

// RLSpec configures the AWARE agent for a workload.
type RLSpec struct {
	// mode is Off (the default), Shadow or On.
	// +optional
	// +kubebuilder:default=Off
	Mode RLMode `json:"mode,omitempty"`

	// slo is the latency objective the reward is measured against. Without
	// it the reward counts utilisation only.
	// +optional
	SLO *SLOSpec `json:"slo,omitempty"`

	// alpha weighs resource utilisation against SLO performance in the
	// reward R = alpha*RU + (1-alpha)*SP. It lies in [0, 1]; default 0.5.
	// +optional
	// +kubebuilder:default=0.5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	Alpha *float64 `json:"alpha,omitempty"`

	// gates are the thresholds that move the agent between stages.
	// +optional
	Gates *RLGates `json:"gates,omitempty"`
}

// SLOSpec is a latency objective.
// +kubebuilder:validation:XValidation:rule="duration(self.target) > duration('0s')",message="slo.target must be greater than zero"
type SLOSpec struct {
	// metric names the latency histogram (Prometheus metric name, usually
	// ending in _seconds) and an optional label selector.
	Metric autoscalingv2.MetricIdentifier `json:"metric"`

	// percentile of the latency distribution that must stay under target:
	// 50, 90, 95 (the default) or 99.
	// +optional
	// +kubebuilder:default=95
	// +kubebuilder:validation:Enum=50;90;95;99
	Percentile int32 `json:"percentile,omitempty"`

	// target is the latency objective, e.g. "250ms"; it must be > 0.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	Target metav1.Duration `json:"target"`
}

// RLGates are the thresholds on the mean and standard deviation of the last
// window episode rewards that move the agent between stages.
// +kubebuilder:validation:XValidation:rule="!has(self.retrainBelowMean) || !has(self.promoteMinMean) || self.retrainBelowMean <= self.promoteMinMean",message="retrainBelowMean must not exceed promoteMinMean"
// +kubebuilder:validation:XValidation:rule="!has(self.retrainAboveStdDev) || !has(self.promoteMaxStdDev) || self.retrainAboveStdDev >= self.promoteMaxStdDev",message="retrainAboveStdDev must be at least promoteMaxStdDev"
type RLGates struct {
	// window is how many recent episodes the gates look at. Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=1000
	Window int32 `json:"window,omitempty"`

	// episodeSteps is how many recommender ticks make one episode.
	// Default 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	EpisodeSteps int32 `json:"episodeSteps,omitempty"`

	// promoteMinMean: the agent leaves Bootstrapping (and Retraining) when
	// the mean episode reward is at least this. Default 0.6.
	// +optional
	// +kubebuilder:default=0.6
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=1
	PromoteMinMean *float64 `json:"promoteMinMean,omitempty"`

	// promoteMaxStdDev: ...and the standard deviation at most this.
	// Default 0.1.
	// +optional
	// +kubebuilder:default=0.1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	PromoteMaxStdDev *float64 `json:"promoteMaxStdDev,omitempty"`

	// retrainBelowMean: a serving policy goes back to training when the mean
	// episode reward falls below this. Default 0.5.
	// +optional
	// +kubebuilder:default=0.5
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=1
	RetrainBelowMean *float64 `json:"retrainBelowMean,omitempty"`

	// retrainAboveStdDev: ...or when the standard deviation rises above
	// this. Default 0.2.
	// +optional
	// +kubebuilder:default=0.2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	RetrainAboveStdDev *float64 `json:"retrainAboveStdDev,omitempty"`
}

// MultidimPodAutoscalerStatus is the state of the autoscaler.
type MultidimPodAutoscalerStatus struct {
	// observedGeneration is the spec generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastScaleTime is when the updater last changed the replica count or
	// pod resources.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// recommendationTime is when the recommender last confirmed the
	// recommendation, even if unchanged. The updater ignores recommendations
	// older than its --max-recommendation-age.
	// +optional
	RecommendationTime *metav1.Time `json:"recommendationTime,omitempty"`

	// currentReplicas is the number of replicas the target has.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas"`

	// desiredReplicas is the recommended number of replicas.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas"`

	// recommendation holds the recommended per-container resources.
	// +optional
	Recommendation *RecommendedPodResources `json:"recommendation,omitempty"`

	// currentMetrics is the last read state of the goal metrics.
	// +optional
	// +listType=atomic
	CurrentMetrics []autoscalingv2.MetricStatus `json:"currentMetrics,omitempty"`

	// conditions describe whether the autoscaler can do its job.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []MultidimPodAutoscalerCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// rl is the state of the RL agent for this workload.
	// +optional
	RL *RLStatus `json:"rl,omitempty"`
}

// RecommendedPodResources holds per-container recommendations.
type RecommendedPodResources struct {
	// containerRecommendations has one entry per controlled container.
	// +optional
	// +listType=atomic
	ContainerRecommendations []RecommendedContainerResources `json:"containerRecommendations,omitempty"`
}

// RecommendedContainerResources is the recommendation for one container.
type RecommendedContainerResources struct {
	// containerName is the container the recommendation is for.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
	// target is the recommended request.
	Target corev1.ResourceList `json:"target"`
	// lowerBound is the smallest request that needs no change.
	// +optional
	LowerBound corev1.ResourceList `json:"lowerBound,omitempty"`
	// upperBound is the largest request that needs no change.
	// +optional
	UpperBound corev1.ResourceList `json:"upperBound,omitempty"`
	// uncappedTarget is the target before the container policy's bounds.
	// +optional
	UncappedTarget corev1.ResourceList `json:"uncappedTarget,omitempty"`
}

// MultidimPodAutoscalerConditionType names a condition.
type MultidimPodAutoscalerConditionType string

const (
	// RecommendationProvided: the recommender produced a recommendation.
	RecommendationProvided MultidimPodAutoscalerConditionType = "RecommendationProvided"
	// LowConfidence: some container's history is too short to trust.
	LowConfidence MultidimPodAutoscalerConditionType = "LowConfidence"
	// NoPodsMatched: the target's selector matches no pods.
	NoPodsMatched MultidimPodAutoscalerConditionType = "NoPodsMatched"
	// FetchingHistory: the recommender is loading history at start-up.
	FetchingHistory MultidimPodAutoscalerConditionType = "FetchingHistory"
	// ConfigDeprecated: the configuration will stop being supported.
	ConfigDeprecated MultidimPodAutoscalerConditionType = "ConfigDeprecated"
	// ConfigUnsupported: the configuration cannot be acted on.
	ConfigUnsupported MultidimPodAutoscalerConditionType = "ConfigUnsupported"
	// ScalingActive: the metrics can be read and scaling is enabled.
	ScalingActive MultidimPodAutoscalerConditionType = "ScalingActive"
	// AbleToScale: no transient problem prevents scaling.
	AbleToScale MultidimPodAutoscalerConditionType = "AbleToScale"
	// ScalingLimited: the computed scale was capped by min or max.
	ScalingLimited MultidimPodAutoscalerConditionType = "ScalingLimited"
	// ResizeInfeasible: in InPlace mode, the kubelet (or the API server)
	// refused some pod's in-place resize as infeasible; the message names
	// the pods. The updater sets it and sends such a pod's resize again
	// only when the recommendation changes.
	ResizeInfeasible MultidimPodAutoscalerConditionType = "ResizeInfeasible"
)

// MultidimPodAutoscalerCondition is one observation of the autoscaler's
// state.
type MultidimPodAutoscalerCondition struct {
	// type of the condition.
	Type MultidimPodAutoscalerConditionType `json:"type"`
	// status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// lastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// reason is a CamelCase word for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message explains the transition for humans.
	// +optional
	Message string `json:"message,omitempty"`
}

// RLStage is where a workload's policy is in its lifecycle.
// +kubebuilder:validation:Enum=Bootstrapping;OnlineTraining;Serving;Retraining
type RLStage string

const (
	// RLStageBootstrapping: the defaults act; the agent learns from them.
	RLStageBootstrapping RLStage = "Bootstrapping"
	// RLStageOnlineTraining: the agent acts, with the safeguard, and learns.
	RLStageOnlineTraining RLStage = "OnlineTraining"
	// RLStageServing: the agent acts with frozen weights.
	RLStageServing RLStage = "Serving"
	// RLStageRetraining: the detector saw the policy degrade; it learns
	// again.
	RLStageRetraining RLStage = "Retraining"
)

// RecommendationSource says who produced the applied recommendation.
// +kubebuilder:validation:Enum=Agent;Default;Safeguard
type RecommendationSource string

const (
	// SourceAgent: the RL agent's recommendation was applied.
	SourceAgent RecommendationSource = "Agent"
	// SourceDefault: the fused HPA+VPA default was applied.
	SourceDefault RecommendationSource = "Default"
	// SourceSafeguard: the agent's downward step was refused.
	SourceSafeguard RecommendationSource = "Safeguard"
)

// RLStatus is the state of the agent for one workload.
type RLStatus struct {
	// stage of the workload's policy.
	// +optional
	Stage RLStage `json:"stage,omitempty"`
	// policyVersion identifies the weights that produced the last answer.
	// +optional
	PolicyVersion string `json:"policyVersion,omitempty"`
	// episodes counts completed episodes.
	// +optional
	Episodes int64 `json:"episodes,omitempty"`
	// rewardMean is the mean of the last window episode rewards.
	// +optional
	RewardMean *float64 `json:"rewardMean,omitempty"`
	// rewardStdDev is their standard deviation.
	// +optional
	RewardStdDev *float64 `json:"rewardStdDev,omitempty"`
	// source of the last applied recommendation.
	// +optional
	Source RecommendationSource `json:"source,omitempty"`
	// reason is a CamelCase word for why that source was used.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message explains the reason for humans.
	// +optional
	Message string `json:"message,omitempty"`
	// lastAgentContactTime is when the agent last answered.
	// +optional
	LastAgentContactTime *metav1.Time `json:"lastAgentContactTime,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MultidimPodAutoscalerList is a list of MultidimPodAutoscaler objects.
type MultidimPodAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items is the list of autoscalers.
	Items []MultidimPodAutoscaler `json:"items"`
}
