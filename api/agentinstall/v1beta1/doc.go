// Package v1beta1 holds our wire-compatible agent-install.openshift.io/v1beta1
// API of the agent-based install: InfraEnv (a discovery image and the hosts
// booted from it), NMStateConfig (static network of those hosts), Agent (one
// discovered host), AgentClassification (labels Agents by a query on
// their inventory) and AgentServiceConfig (the service's configuration: the
// OS images installs write). Group, version, kinds, scope, printer columns and JSON
// field names match the assisted service's, so that its manifests and tools
// work unchanged; the Go code is metalshift's own. Types only: no client, no
// controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=agent-install.openshift.io
package v1beta1
