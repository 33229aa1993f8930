// Package openshiftconfig reconciles OpenShiftConfig: it renders the
// Ignition config of a master or worker (a pointer to the cluster's
// machine-config-server, trusting the cluster CA, plus the user's override)
// into a Secret and reports it through the Cluster API bootstrap contract.
package openshiftconfig
