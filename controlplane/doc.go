// Package controlplane is the OpenShift control-plane provider: the
// OpenShiftControlPlane reconciler, which brings up a bootstrap node, then
// the masters, then removes the bootstrap node.
package controlplane
