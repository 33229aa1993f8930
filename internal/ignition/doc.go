// Package ignition renders and validates the Ignition configs of OpenShift
// machines: the bootstrap node's config and the master / worker pointer
// configs, with a validated override merged in. Both renderers use it, the
// bootstrap provider (bootstrap/reconcilers/openshiftconfig) and the
// agent-based install (assisted/pkg/installstate). It has no Kubernetes
// client. Every config it returns parses with github.com/coreos/ignition/v2
// without errors.
package ignition
