// Package v1alpha1 holds the bootstrap.cluster.x-k8s.io/v1alpha1 types of
// metalshift's OpenShift bootstrap provider (Cluster API v1beta2 bootstrap
// contract). Types only.
//
// +kubebuilder:object:generate=true
// +groupName=bootstrap.cluster.x-k8s.io
package v1alpha1
