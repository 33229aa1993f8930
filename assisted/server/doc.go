// Package server is the agent service's HTTP server: the REST API discovery
// agents speak (api/assisted/v2) and the InfraEnvs' discovery images. It
// keeps no state: a host's record is its Agent object (created at
// registration, its status written with the agent's reports), an install's
// is its AgentClusterInstall and the install-state Secret, so any number of
// replicas serve the same hosts. A host's credential lives as a hash on its
// Agent (auth.go); the InfraEnv's key only registers.
package server
