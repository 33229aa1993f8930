package assistedapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Inventory is the inventory step's output, in the shape and JSON names of
// upstream's models.Inventory (the subset metalshift fills).
type Inventory struct {
	Hostname     string       `json:"hostname"`
	BmcAddress   string       `json:"bmc_address,omitempty"`
	BmcV6Address string       `json:"bmc_v6address,omitempty"`
	Memory       Memory       `json:"memory"`
	CPU          CPU          `json:"cpu"`
	Interfaces   []Interface  `json:"interfaces"`
	Disks        []Disk       `json:"disks"`
	Boot         Boot         `json:"boot"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Routes       []Route      `json:"routes,omitempty"`
	Timestamp    int64        `json:"timestamp,omitempty"`
}

// Memory in bytes.
type Memory struct {
	PhysicalBytes int64 `json:"physical_bytes"`
	UsableBytes   int64 `json:"usable_bytes"`
}

// CPU of the host.
type CPU struct {
	Count        int64    `json:"count"`
	Architecture string   `json:"architecture"`
	ModelName    string   `json:"model_name,omitempty"`
	Frequency    float64  `json:"frequency,omitempty"`
	Flags        []string `json:"flags,omitempty"`
}

// Interface is a NIC.
type Interface struct {
	Name          string   `json:"name"`
	MacAddress    string   `json:"mac_address"`
	IPV4Addresses []string `json:"ipv4_addresses"`
	IPV6Addresses []string `json:"ipv6_addresses"`
	HasCarrier    bool     `json:"has_carrier"`
	SpeedMbps     int64    `json:"speed_mbps,omitempty"`
	Mtu           int64    `json:"mtu,omitempty"`
	Vendor        string   `json:"vendor,omitempty"`
	Product       string   `json:"product,omitempty"`
	Type          string   `json:"type,omitempty"`
}

// Disk is a block device.
type Disk struct {
	ID                      string                  `json:"id"`
	Name                    string                  `json:"name"`
	Path                    string                  `json:"path"`
	ByPath                  string                  `json:"by_path,omitempty"`
	ByID                    string                  `json:"by_id,omitempty"`
	DriveType               string                  `json:"drive_type"`
	Hctl                    string                  `json:"hctl,omitempty"`
	Model                   string                  `json:"model,omitempty"`
	Vendor                  string                  `json:"vendor,omitempty"`
	Serial                  string                  `json:"serial,omitempty"`
	Wwn                     string                  `json:"wwn,omitempty"`
	SizeBytes               int64                   `json:"size_bytes"`
	Bootable                bool                    `json:"bootable"`
	InstallationEligibility InstallationEligibility `json:"installation_eligibility"`
}

// InstallationEligibility tells whether a disk can take the OS.
type InstallationEligibility struct {
	Eligible           bool     `json:"eligible"`
	NotEligibleReasons []string `json:"not_eligible_reasons"`
}

// Boot is how the host booted.
type Boot struct {
	CurrentBootMode string `json:"current_boot_mode"`
	PxeInterface    string `json:"pxe_interface,omitempty"`
	DeviceType      string `json:"device_type,omitempty"`
}

// SystemVendor of the host.
type SystemVendor struct {
	Manufacturer string `json:"manufacturer"`
	ProductName  string `json:"product_name"`
	SerialNumber string `json:"serial_number"`
	Virtual      bool   `json:"virtual,omitempty"`
}

// Route is a routing table entry.
type Route struct {
	Interface   string `json:"interface"`
	Destination string `json:"destination"`
	Gateway     string `json:"gateway"`
	Family      int32  `json:"family"`
}

// Drive types (upstream's).
const (
	DriveTypeHDD = "HDD"
	DriveTypeSSD = "SSD"
	DriveTypeODD = "ODD"
)

// MinDiskSizeBytes is the smallest disk an agent calls eligible by size
// (upstream: 20 GB for discovery; the role minimums are the service's).
const MinDiskSizeBytes = 20_000_000_000

// Limits of an inventory the service accepts. The Agent keeps the
// inventory in its status and mirrors it into an annotation, and an
// object's annotations may hold 256 KiB in all: a real host's inventory is
// a few KiB.
const (
	MaxInventoryBytes      = 64 << 10
	MaxInventoryInterfaces = 128
	MaxInventoryDisks      = 256
	MaxInventoryRoutes     = 512
	MaxInventoryAddresses  = 64 // per interface and family
	MaxHostnameLength      = 253
)

// ParseInventory decodes an inventory step's output and checks it against
// the limits; the error names the problem, for a 400 answer.
func ParseInventory(data []byte) (*Inventory, error) {
	if len(data) > MaxInventoryBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(data), MaxInventoryBytes)
	}
	inv := &Inventory{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(inv); err != nil {
		return nil, fmt.Errorf("not an inventory: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not an inventory: data after the JSON object")
	}
	for _, c := range []struct {
		what   string
		n, max int
	}{
		{"interfaces", len(inv.Interfaces), MaxInventoryInterfaces},
		{"disks", len(inv.Disks), MaxInventoryDisks},
		{"routes", len(inv.Routes), MaxInventoryRoutes},
		{"hostname characters", len(inv.Hostname), MaxHostnameLength},
	} {
		if c.n > c.max {
			return nil, fmt.Errorf("%d %s, at most %d", c.n, c.what, c.max)
		}
	}
	for _, n := range inv.Interfaces {
		if len(n.IPV4Addresses) > MaxInventoryAddresses || len(n.IPV6Addresses) > MaxInventoryAddresses {
			return nil, fmt.Errorf("interface %.64q has more than %d addresses of a family", n.Name, MaxInventoryAddresses)
		}
	}
	return inv, nil
}
