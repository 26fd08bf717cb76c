// Package v1alpha1 is the MultidimPodAutoscaler API, group
// autoscaling.aware.dev.
//
// The schema is a superset of upstream MPA's autoscaling.k8s.io/v1alpha1: an
// upstream manifest with only apiVersion changed decodes into these types and
// means the same thing. Fields that upstream took from the VPA API
// (PodResourcePolicy, RecommendedPodResources, UpdateMode) are redeclared here
// with identical JSON so the module does not depend on the VPA module.
// Everything under spec.rl and status.rl is the AWARE extension.
//
// +k8s:deepcopy-gen=package
// +groupName=autoscaling.aware.dev
package v1alpha1
