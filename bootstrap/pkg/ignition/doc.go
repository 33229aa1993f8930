// Package ignition renders and validates the Ignition configs of OpenShift
// machines. It has no Kubernetes client. Every config it returns parses
// with github.com/coreos/ignition/v2 without errors.
package ignition
