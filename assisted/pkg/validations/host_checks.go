package validations

import (
	"fmt"
	"regexp"
	"slices"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// hostChecks evaluates the host validations; req is the effective role's
// minimum, min the smallest over roles.
type hostChecks struct {
	in       HostInput
	req, min Requirements
}

const msgMissingInventory = "Missing inventory"

func (h hostChecks) inv() *assistedapi.Inventory { return h.in.Inventory }

func (h hostChecks) role() string {
	if h.in.Role == "" {
		return RoleAutoAssign
	}
	return h.in.Role
}

func (h hostChecks) hostname() string {
	if h.in.Hostname != "" || h.inv() == nil {
		return h.in.Hostname
	}
	return h.inv().Hostname
}

func (h hostChecks) connected() outcome {
	if h.in.Connected {
		return ok("Host is connected")
	}
	return fail("Host is disconnected")
}

func (h hostChecks) hasInventory() outcome {
	if h.inv() != nil {
		return ok("Valid inventory exists for the host")
	}
	return fail("Inventory has not been received for the host")
}

func (h hostChecks) minCPU() outcome {
	if h.inv() == nil {
		return pending(msgMissingInventory)
	}
	if h.inv().CPU.Count >= h.min.CPUCores {
		return ok("Sufficient CPU cores")
	}
	return fail(fmt.Sprintf("The host is not eligible to participate in Openshift Cluster because the minimum required CPU cores for any role is %d, found only %d",
		h.min.CPUCores, h.inv().CPU.Count))
}

func (h hostChecks) minMemory() outcome {
	if h.inv() == nil {
		return pending(msgMissingInventory)
	}
	if h.inv().Memory.PhysicalBytes >= h.min.RAMMiB*mib {
		return ok("Sufficient minimum RAM")
	}
	return fail(fmt.Sprintf("The host is not eligible to participate in Openshift Cluster because the minimum required RAM for any role is %s, found only %s",
		bytesString(h.min.RAMMiB*mib), bytesString(h.inv().Memory.PhysicalBytes)))
}

func (h hostChecks) minDisks() outcome {
	if h.inv() == nil {
		return pending(msgMissingInventory)
	}
	if h.in.InstallationDisk != "" {
		return ok("Sufficient disk capacity")
	}
	return fail("No eligible disks were found, please check specific disks to see why they are not eligible")
}

func (h hostChecks) cpuForRole() outcome {
	if h.inv() == nil {
		return pending("Missing inventory or role")
	}
	if h.inv().CPU.Count >= h.req.CPUCores {
		return ok(fmt.Sprintf("Sufficient CPU cores for role %s", h.role()))
	}
	return fail(fmt.Sprintf("Require at least %d CPU cores for %s role, found only %d", h.req.CPUCores, h.role(), h.inv().CPU.Count))
}

func (h hostChecks) memoryForRole() outcome {
	if h.inv() == nil {
		return pending("Missing inventory or role")
	}
	if h.inv().Memory.PhysicalBytes >= h.req.RAMMiB*mib {
		return ok(fmt.Sprintf("Sufficient RAM for role %s", h.role()))
	}
	return fail(fmt.Sprintf("Require at least %s RAM for role %s, found only %s",
		bytesString(h.req.RAMMiB*mib), h.role(), bytesString(h.inv().Memory.PhysicalBytes)))
}

// hostnamePattern is upstream's rule for host names.
const hostnamePattern = "^[a-z0-9][a-z0-9-]{0,62}(?:[.][a-z0-9-]{1,63})*$"

var (
	hostnameRE         = regexp.MustCompile(hostnamePattern)
	forbiddenHostnames = []string{"localhost", "localhost.localdomain", "localhost4", "localhost4.localdomain4", "localhost6", "localhost6.localdomain6"}
)

func (h hostChecks) hostnameValid() outcome {
	if h.inv() == nil {
		return fail(msgMissingInventory)
	}
	name := h.hostname()
	if slices.Contains(forbiddenHostnames, name) {
		return fail(fmt.Sprintf("The host name %s is forbidden", name))
	}
	if !hostnameRE.MatchString(name) {
		return fail(fmt.Sprintf("Hostname %s is forbidden, hostname should match pattern %s", name, hostnamePattern))
	}
	return ok(fmt.Sprintf("Hostname %s is allowed", name))
}

func (h hostChecks) hostnameUnique() outcome {
	if h.inv() == nil {
		return pending(msgMissingInventory)
	}
	name := h.hostname()
	if slices.Contains(h.in.OtherHostnames, name) {
		return fail(fmt.Sprintf("Hostname %s is not unique in cluster", name))
	}
	return ok(fmt.Sprintf("Hostname %s is unique in cluster", name))
}

// diskSpeed follows upstream: the speed is measured while preparing the
// installation, so an unmeasured disk passes.
func (h hostChecks) diskSpeed() outcome {
	if h.in.InstallationDisk == "" || h.in.DiskSpeedMs == nil {
		return ok("Speed of installation disk has not yet been measured")
	}
	if t := h.req.InstallationDiskSpeedThresholdMs; t == 0 || *h.in.DiskSpeedMs <= t {
		return ok("Speed of installation disk is sufficient")
	}
	return fail("While preparing the previous installation the installation disk speed measurement failed or was found to be insufficient")
}

// ntpSynced: a bound host fails until one source is synced; an unbound
// host shows the validation only once synced (upstream suppresses it).
func (h hostChecks) ntpSynced() (outcome, bool) {
	for _, s := range h.in.NTPSources {
		if s.SourceState == assistedapi.NTPSourceSynced {
			return ok("Host NTP is synced"), true
		}
	}
	return fail("Host couldn't synchronize with any NTP server"), h.in.Bound
}

func (h hostChecks) machineCIDRDefined() outcome {
	switch {
	case h.in.UserManagedNetworking:
		return ok("No Machine Network CIDR needed: User Managed Networking")
	case h.in.Day2:
		return ok("No Machine Network CIDR needed: Day2 cluster")
	case len(h.in.MachineNetworks) > 0:
		return ok("Machine Network CIDR is defined")
	}
	return fail("Machine Network CIDR is undefined; the Machine Network CIDR can be defined by setting either the API or Ingress virtual IPs")
}

func (h hostChecks) belongsToMachineCIDR() outcome {
	switch {
	case h.in.UserManagedNetworking && !h.in.SNO:
		return ok("No machine network CIDR validation needed: User Managed Networking")
	case h.in.Day2:
		return ok("No machine network CIDR validation needed: Day2 cluster")
	case h.inv() == nil || len(h.in.MachineNetworks) == 0:
		return pending("Missing inventory or machine network CIDR")
	case !inAllNetworks(h.inv(), h.in.MachineNetworks):
		return fail("Host does not belong to machine network CIDRs. Verify that the host belongs to every CIDR listed under machine networks")
	}
	return ok("Host belongs to all machine network CIDRs")
}

func (h hostChecks) platformName() string {
	switch {
	case h.in.Platform != "":
		return h.in.Platform
	case h.in.UserManagedNetworking:
		return "none"
	}
	return "baremetal"
}

// platform: every metalshift host suits the cluster's platform.
func (h hostChecks) platform() outcome {
	if h.inv() == nil && !h.in.Day2 {
		return pending("Missing inventory or platform isn't set")
	}
	return ok(fmt.Sprintf("Host is compatible with cluster platform %s", h.platformName()))
}
