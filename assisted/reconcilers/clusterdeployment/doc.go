// Package clusterdeployment tears down the agent-based install of a deleted
// ClusterDeployment: it keeps the finalizer
// clusterdeployments.agent-install.openshift.io/ai-deprovision on every
// ClusterDeployment whose spec.clusterInstallRef names an
// AgentClusterInstall, and on deletion deletes that AgentClusterInstall and
// waits until it is gone (its own finalizer releases its Agents). It never
// touches the installed cluster, and it computes no status: the
// AgentClusterInstall reconciler does.
package clusterdeployment
