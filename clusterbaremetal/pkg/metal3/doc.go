// Package metal3 renders what the bare-metal operator deploys for a
// Provisioning: the metal3 Deployment in openshift-machine-api (upstream's
// name; here it runs metalshift's manager with the host engine and its
// deploy and image server), its arguments and environment derived from the
// Provisioning spec; the deploy server's CA and certificate (which
// addresses it holds, when it is issued again); and tells whether a
// Deployment has rolled out. Pure functions: no Kubernetes client.
package metal3
