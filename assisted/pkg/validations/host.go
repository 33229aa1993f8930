package validations

import (
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// HostInput is what the host validations look at.
type HostInput struct {
	// Inventory is the host's last inventory; nil until it sent one.
	Inventory *assistedapi.Inventory
	// Role is the effective role: master, worker, arbiter or auto-assign.
	Role             string
	SNO              bool
	OpenshiftVersion string
	// Hostname is the requested hostname, else the inventory's.
	Hostname string
	// OtherHostnames are the hostnames of the cluster's other hosts.
	OtherHostnames []string
	// InstallationDisk is the chosen disk's path; "" when none is eligible.
	InstallationDisk string
	// DiskSpeedMs is the installation disk's measured fsync duration; nil
	// until measured.
	DiskSpeedMs *int64
	// NTPSources are the host's time sources; nil until reported.
	NTPSources []assistedapi.NTPSource
	Connected  bool
	// MachineNetworks are the cluster's machine CIDRs.
	MachineNetworks []string
	// Bound tells whether the host belongs to a cluster.
	Bound bool
	// DomainsResolved maps a domain name (as DNSDomains names them) to
	// whether the host resolved it; nil until reported.
	DomainsResolved map[string]bool

	// UserManagedNetworking is the cluster's networking mode.
	UserManagedNetworking bool
	// Day2 is set for a host added to an installed cluster.
	Day2 bool
	// Platform is the cluster's platform as upstream names it in messages
	// (baremetal, none, ...); "" means none with user-managed networking,
	// else baremetal.
	Platform string
	// ClusterName and BaseDomain name the cluster's DNS records.
	ClusterName, BaseDomain string
}

// Host computes a host's validations. A bound host gets the network,
// hardware and (empty) operators categories; an unbound one only the
// validations upstream shows for hosts without a cluster.
func Host(in HostInput) Results {
	r := Results{}
	h := hostChecks{in: in, req: RequirementsFor(in.Role, in.SNO, in.OpenshiftVersion), min: RequirementsFor("", in.SNO, in.OpenshiftVersion)}
	r.put(CategoryNetwork, IDConnected, h.connected())
	r.put(CategoryHardware, IDHasInventory, h.hasInventory())
	r.put(CategoryHardware, IDHasMinCPUCores, h.minCPU())
	r.put(CategoryHardware, IDHasMinMemory, h.minMemory())
	r.put(CategoryHardware, IDHasMinValidDisks, h.minDisks())
	r.put(CategoryHardware, IDHasCPUCoresForRole, h.cpuForRole())
	r.put(CategoryHardware, IDHasMemoryForRole, h.memoryForRole())
	r.put(CategoryHardware, IDHostnameValid, h.hostnameValid())
	r.put(CategoryHardware, IDSufficientInstallDiskSpeed, h.diskSpeed())
	if o, shown := h.ntpSynced(); shown {
		r.put(CategoryNetwork, IDNTPSynced, o)
	}
	if !in.Bound {
		return r.sorted()
	}
	r.put(CategoryNetwork, IDHostMachineCIDRDefined, h.machineCIDRDefined())
	r.put(CategoryNetwork, IDBelongsToMachineCIDR, h.belongsToMachineCIDR())
	for _, d := range h.dnsChecks() {
		r.put(CategoryNetwork, d.id, d.outcome)
	}
	r.put(CategoryHardware, IDHostnameUnique, h.hostnameUnique())
	r.put(CategoryHardware, IDCompatibleWithClusterPlatform, h.platform())
	r[CategoryOperators] = []Result{}
	return r.sorted()
}
