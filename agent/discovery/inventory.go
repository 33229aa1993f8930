package discovery

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// architectures maps Go's architecture names to the kernel's (uname -m),
// which the inventory uses.
var architectures = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// FromDeployInventory converts the agent's inventory of the machine (what
// agent/host reads) to the inventory step's shape. The interfaces have no
// addresses: the caller adds what the running system has. A machine whose
// hostname is unset (the kernel says "(none)") reports "localhost", as a
// system with systemd does; the hostname validations then ask for one.
func FromDeployInventory(inv *deployapi.Inventory, hostname string) *assistedapi.Inventory {
	if hostname == "" || hostname == "(none)" {
		hostname = "localhost"
	}
	out := &assistedapi.Inventory{
		Hostname: hostname,
		Memory:   assistedapi.Memory{PhysicalBytes: inv.MemoryBytes, UsableBytes: inv.MemoryBytes},
		CPU: assistedapi.CPU{
			Count:        int64(inv.CPU.Count),
			Architecture: inv.CPU.Architecture,
			ModelName:    inv.CPU.Model,
			Frequency:    inv.CPU.MHz,
		},
		Interfaces: []assistedapi.Interface{},
		Disks:      []assistedapi.Disk{},
		Boot:       assistedapi.Boot{CurrentBootMode: "bios"},
		SystemVendor: assistedapi.SystemVendor{
			Manufacturer: inv.SystemVendor.Manufacturer,
			ProductName:  inv.SystemVendor.ProductName,
			SerialNumber: inv.SystemVendor.SerialNumber,
		},
	}
	if a, ok := architectures[inv.CPU.Architecture]; ok {
		out.CPU.Architecture = a
	}
	if inv.BootMode == deployapi.BootModeUEFI {
		out.Boot.CurrentBootMode = "uefi"
	}
	for _, n := range inv.NICs {
		out.Interfaces = append(out.Interfaces, assistedapi.Interface{
			Name:          n.Name,
			MacAddress:    n.MAC,
			HasCarrier:    n.HasLink,
			SpeedMbps:     int64(n.SpeedMbps),
			IPV4Addresses: []string{},
			IPV6Addresses: []string{},
			Type:          "physical",
		})
	}
	for _, d := range inv.Disks {
		out.Disks = append(out.Disks, disk(d))
	}
	return out
}

// disk converts one disk; its name is the kernel's (sda), its path and ID
// /dev/<name>.
func disk(d deployapi.Disk) assistedapi.Disk {
	name := strings.TrimPrefix(d.Name, "/dev/")
	out := assistedapi.Disk{
		ID:        "/dev/" + name,
		Name:      name,
		Path:      "/dev/" + name,
		DriveType: assistedapi.DriveTypeSSD,
		Hctl:      d.HCTL,
		Model:     d.Model,
		Vendor:    d.Vendor,
		Serial:    d.SerialNumber,
		Wwn:       d.WWN,
		SizeBytes: d.SizeBytes,
		InstallationEligibility: assistedapi.InstallationEligibility{
			Eligible:           true,
			NotEligibleReasons: []string{},
		},
	}
	if d.Rotational {
		out.DriveType = assistedapi.DriveTypeHDD
	}
	if d.SizeBytes < assistedapi.MinDiskSizeBytes {
		out.InstallationEligibility = assistedapi.InstallationEligibility{NotEligibleReasons: []string{
			fmt.Sprintf("Disk is too small (disk only has %s, but %s are required)", gigabytes(d.SizeBytes), gigabytes(assistedapi.MinDiskSizeBytes)),
		}}
	}
	return out
}

// gigabytes spells a size in GB (10^9 bytes), rounded down to 0.1 GB.
func gigabytes(n int64) string {
	return strconv.FormatFloat(math.Floor(float64(n)/1e8)/10, 'f', -1, 64) + " GB"
}
