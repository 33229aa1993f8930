// Package manifests holds the bare-metal operator's manifests as a release
// payload ships them (upstream's manifests/ directory): its namespace,
// service account, RBAC, webhook Service and configuration, and the
// cluster-baremetal-operator Deployment. The cluster's version operator
// applies them; in the simulated installed clusters that is the simulator.
//
// The Deployment's image is ImagePlaceholder and its version
// VersionPlaceholder (upstream's), which whoever applies the payload
// replaces with the release's.
package manifests

import _ "embed"

// Placeholders in the manifests.
const (
	ImagePlaceholder   = "metalshift/manager:latest"
	VersionPlaceholder = "0.0.1-snapshot"
)

// YAML is the manifests, one multi-document YAML in the order they apply.
//
//go:embed cluster-baremetal-operator.yaml
var YAML []byte
