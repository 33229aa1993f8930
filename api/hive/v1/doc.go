// Package v1 holds our wire-compatible subset of hive's hive.openshift.io/v1
// API that the agent-based install reads and writes: ClusterDeployment (the
// fields that point at an AgentClusterInstall and record the installed
// cluster) and ClusterImageSet (the release to install). Group, version,
// kinds, scope, short names and JSON field names match hive's, so that
// manifests written for hive and the assisted service apply unchanged;
// fields hive has and this subset lacks are pruned by the API server. Types
// only: no client, no controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=hive.openshift.io
package v1
