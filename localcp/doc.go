// Package localcp runs a hub control plane on one machine: etcd,
// kube-apiserver and kube-controller-manager (garbage collection, namespace
// deletion, service-account tokens) as child processes, with their own CA and
// certificates, on free loopback ports, keeping every byte of state under one
// directory so that a restart resumes where the last run stopped.
//
// It installs every CRD the hub serves and registers the hub's admission and
// conversion webhooks, but runs no controller of its own: the caller starts
// the manager (package manager) against Hub.RESTConfig.
//
// Children never outlive the hub: they get SIGKILL when the process that
// started them dies (Linux parent-death signal), are stopped in order on
// Stop, and leftovers of a hub that was killed are reaped on the next start.
package localcp
