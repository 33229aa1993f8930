//go:build tools

// Package clusterctl pins clusterctl at the Cluster API version of the main
// module (hack/tools/build.sh checks they agree); it is never imported.
package clusterctl

import _ "sigs.k8s.io/cluster-api/cmd/clusterctl"
