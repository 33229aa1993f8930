// Package v1 holds our wire-compatible subset of the config.openshift.io/v1
// types an installed OpenShift cluster reports its progress with
// (ClusterVersion, ClusterOperator) and describes its infrastructure with
// (Infrastructure). Types only.
//
// +kubebuilder:object:generate=true
// +groupName=config.openshift.io
package v1
