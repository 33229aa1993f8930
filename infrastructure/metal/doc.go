// Package metal is the bare-metal infrastructure provider: MetalCluster
// (the cluster's API endpoint, its API VIP) and MetalMachine claiming
// BareMetalHosts. Setup registers its controllers.
package metal
