// Package bootstrap is the OpenShift bootstrap provider of Cluster API: it
// renders the Ignition config a Machine boots with into the Secret that the
// Cluster API bootstrap contract names. Setup registers its controllers.
package bootstrap
