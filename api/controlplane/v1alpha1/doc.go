// Package v1alpha1 holds the controlplane.cluster.x-k8s.io/v1alpha1 types of
// metalshift's OpenShift control-plane provider (Cluster API v1beta2
// control-plane contract). Types only.
//
// +kubebuilder:object:generate=true
// +groupName=controlplane.cluster.x-k8s.io
package v1alpha1
