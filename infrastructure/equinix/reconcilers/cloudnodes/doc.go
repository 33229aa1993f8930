// Package cloudnodes runs, from the hub, one cloud-node controller
// (package cloudnode) per Equinix Metal cluster whose control plane is
// initialized, against that cluster's API: the project's key stays in the
// hub's credentials Secret and never goes into the installed cluster.
//
// A controller of EquinixMetalClusters decides what runs, from the API
// alone: a cluster's controller runs while its EquinixMetalCluster is not
// being deleted, its Cluster exists with status.initialization.
// controlPlaneInitialized, and Cluster API's <cluster>-kubeconfig Secret
// holds a kubeconfig the hub accepts (package kubeconfig). It is started
// again when what it was started from changes — the kubeconfig, the key,
// the API URL, the project — and stopped otherwise. The running
// controllers are the only state kept in memory, and a restarted hub
// starts them again from the same objects.
//
// The controllers run only on the leader: they are goroutines of a
// Runnable that needs leader election, and end with the manager. A
// controller that cannot reach the cluster's API, or stops with an error,
// is started again after a pause that doubles up to a bound; each start,
// failure and stop is logged once and recorded as an Event on the
// EquinixMetalCluster.
package cloudnodes
