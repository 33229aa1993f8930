// Package equinix runs the Equinix Metal platform end to end on the
// emulator: the provider's reconcilers on a real kube-apiserver with the
// Cluster API core, the deploy server serving devices their iPXE script,
// and simulated machines for the devices that boot it, read the metadata
// service and install their disk.
package equinix
