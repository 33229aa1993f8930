// Package assisted is the agent-based install as a part of the hub: it
// serves the assisted service's Kubernetes API (agent-install.openshift.io
// InfraEnv, NMStateConfig, Agent, AgentClassification;
// extensions.hive.openshift.io AgentClusterInstall) and the subset of hive's
// (ClusterDeployment, ClusterImageSet) that API points at, with their
// admission webhooks (webhooks), and runs the service behind it: the agent
// service's HTTP server (server: the REST API discovery agents speak and
// the InfraEnvs' discovery images), the controllers of InfraEnv, Agent,
// AgentClusterInstall, ClusterDeployment, AgentClassification, the
// BareMetalHost integration (bmac) and the converged flow's
// PreprovisioningImages (reconcilers/...), and the host and cluster state
// machines and validations (pkg/...). See docs/agent-install.md.
package assisted
