package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=mpacheckpoint
// +kubebuilder:printcolumn:name="MPA",type="string",JSONPath=".spec.mpaObjectName"
// +kubebuilder:printcolumn:name="Container",type="string",JSONPath=".spec.containerName"
// +kubebuilder:printcolumn:name="Samples",type="integer",JSONPath=".status.totalSamplesCount"
// +kubebuilder:printcolumn:name="Updated",type="date",JSONPath=".status.lastUpdateTime"

// MultidimPodAutoscalerCheckpoint stores the recommender's usage histograms
// for one container of one MultidimPodAutoscaler, so a restarted
// recommender keeps its history. It is written by the recommender only and
// deleted when its MultidimPodAutoscaler is gone.
type MultidimPodAutoscalerCheckpoint struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec identifies the container the checkpoint belongs to.
	// +optional
	Spec MultidimPodAutoscalerCheckpointSpec `json:"spec,omitempty"`

	// status is the checkpointed histogram state.
	// +optional
	Status MultidimPodAutoscalerCheckpointStatus `json:"status,omitempty"`
}

// MultidimPodAutoscalerCheckpointSpec identifies a checkpoint's owner.
type MultidimPodAutoscalerCheckpointSpec struct {
	// mpaObjectName is the MultidimPodAutoscaler in the same namespace.
	// +optional
	MPAObjectName string `json:"mpaObjectName,omitempty"`
	// containerName is the container whose history this is.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// MultidimPodAutoscalerCheckpointStatus is a container's usage history.
type MultidimPodAutoscalerCheckpointStatus struct {
	// lastUpdateTime is when the checkpoint was written.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
	// version of the checkpoint format; a recommender ignores versions it
	// does not know.
	// +optional
	Version string `json:"version,omitempty"`
	// cpuHistogram is the decaying CPU usage histogram.
	// +optional
	CPUHistogram HistogramCheckpoint `json:"cpuHistogram,omitempty"`
	// memoryHistogram is the decaying memory peak histogram.
	// +optional
	MemoryHistogram HistogramCheckpoint `json:"memoryHistogram,omitempty"`
	// firstSampleStart is the time of the oldest sample.
	// +optional
	FirstSampleStart metav1.Time `json:"firstSampleStart,omitempty"`
	// lastSampleStart is the time of the newest sample.
	// +optional
	LastSampleStart metav1.Time `json:"lastSampleStart,omitempty"`
	// totalSamplesCount is how many samples the histograms hold.
	// +optional
	TotalSamplesCount int64 `json:"totalSamplesCount,omitempty"`
}

// HistogramCheckpoint is a decaying histogram in compact form: bucket
// weights are scaled so the largest is 10000, which keeps the object small
// while losing little precision.
type HistogramCheckpoint struct {
	// referenceTimestamp is the time the weights are relative to.
	// +optional
	ReferenceTimestamp metav1.Time `json:"referenceTimestamp,omitempty"`
	// bucketWeights maps a bucket index (decimal string) to its scaled
	// weight.
	// +optional
	// +kubebuilder:validation:MaxProperties=1000
	BucketWeights map[string]int32 `json:"bucketWeights,omitempty"`
	// totalWeight is the sum of the unscaled weights.
	// +optional
	TotalWeight float64 `json:"totalWeight,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MultidimPodAutoscalerCheckpointList is a list of checkpoints.
type MultidimPodAutoscalerCheckpointList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items is the list of checkpoints.
	Items []MultidimPodAutoscalerCheckpoint `json:"items"`
}
