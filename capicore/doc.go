// Package capicore runs the upstream Cluster API core controllers and
// admission webhooks in-process, unmodified, as one component of the hub
// manager: Cluster, Machine, MachineSet, MachineDeployment and
// MachineHealthCheck, with the ClusterCache that gives them clients for the
// workload clusters (node references, drain).
//
// It must not patch or reimplement upstream behaviour; it only wires the
// upstream reconcilers the way the upstream core manager does.
package capicore
