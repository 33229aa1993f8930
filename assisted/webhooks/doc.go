// Package webhooks holds the admission webhooks of the agent-based
// install's APIs, served in-process by the hub manager, with the rules and
// the messages of upstream assisted-service's: the defaulting and
// validation of extensions.hive.openshift.io AgentClusterInstalls, and the
// validation of agent-install.openshift.io InfraEnvs, Agents and
// AgentClassifications on create and update. A refusal carries upstream's
// message and HTTP status, so that people and tools written against
// assisted-service read what they would read there.
//
// One refusal is metalshift's own: a reference to another namespace (an
// InfraEnv's clusterRef, an Agent's clusterDeploymentName, any namespace
// field of these objects), which upstream allows for some. A namespace is
// a tenant's; the controllers refuse such references too (package
// record), so that a hub without these webhooks is as safe.
//
// The webhooks judge an object from itself and its previous version (the
// install's and the host's state are in their status); the InfraEnv
// webhook alone reads, the ClusterDeployment an InfraEnv names. They must
// not write anything or call out of the process.
package webhooks
