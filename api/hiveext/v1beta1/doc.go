// Package v1beta1 holds our wire-compatible extensions.hive.openshift.io/v1beta1
// API: AgentClusterInstall, the cluster install resource of the agent-based
// install that a hive ClusterDeployment points at. Group, version, kind,
// scope, short name, printer columns and JSON field names match the
// assisted service's, so that its manifests apply unchanged; the Go code is
// metalshift's own. Types only: no client, no controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.hive.openshift.io
package v1beta1
