// Package openshiftcontrolplane reconciles OpenShiftControlPlanes: it
// creates the bootstrap Machine, waits until the bootstrap node serves the
// API at the cluster's endpoint, creates the masters, declares the control
// plane initialized once the installed cluster reports the bootstrap
// complete, deletes the bootstrap Machine, owns <cluster>-kubeconfig and
// <cluster>-ca, scales the masters, and deletes them in order.
package openshiftcontrolplane
