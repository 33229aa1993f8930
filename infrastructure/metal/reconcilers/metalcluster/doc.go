// Package metalcluster reconciles MetalCluster, the infrastructure cluster of
// the Cluster API contract on bare metal. There is no load balancer to
// create: the control-plane endpoint is the API VIP the user chose, and the
// infrastructure is provisioned once that endpoint is set.
package metalcluster
