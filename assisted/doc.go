// Package assisted is the agent-based install as a part of the hub: it
// serves the assisted service's Kubernetes API (agent-install.openshift.io
// InfraEnv, NMStateConfig, Agent, AgentClassification;
// extensions.hive.openshift.io AgentClusterInstall) and the subset of hive's
// (ClusterDeployment, ClusterImageSet) that API points at. It runs no
// controller yet: the types and CRDs come first (issue 10).
package assisted
