package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HardwareInventory is a host's hardware as its agent reported it: the
// camelCase mirror of the service's REST inventory.
type HardwareInventory struct {
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// +optional
	BmcAddress string `json:"bmcAddress,omitempty"`
	// +optional
	BmcV6Address string `json:"bmcV6Address,omitempty"`
	// +optional
	Memory HostMemory `json:"memory,omitempty"`
	// +optional
	Cpu HostCPU `json:"cpu,omitempty"` //nolint:revive // wire name
	// +optional
	Interfaces []HostInterface `json:"interfaces,omitempty"`
	// +optional
	Disks []HostDisk `json:"disks,omitempty"`
	// +optional
	Boot HostBoot `json:"boot,omitempty"`
	// +optional
	SystemVendor HostSystemVendor `json:"systemVendor,omitempty"`
	// +optional
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	// +optional
	Gpus []HostGPU `json:"gpus,omitempty"`
}

// HostMemory is a host's RAM.
type HostMemory struct {
	// +optional
	PhysicalBytes int64 `json:"physicalBytes,omitempty"`
	// +optional
	UsableBytes int64 `json:"usableBytes,omitempty"`
}

// HostCPU is a host's processors.
type HostCPU struct {
	// +optional
	Count int64 `json:"count,omitempty"`
	// +optional
	ClockMegahertz int64 `json:"clockMegahertz,omitempty"`
	// +optional
	Flags []string `json:"flags,omitempty"`
	// +optional
	ModelName string `json:"modelName,omitempty"`
	// +optional
	Architecture string `json:"architecture,omitempty"`
}

// HostInterface is one NIC of a host.
type HostInterface struct {
	// +optional
	IPV6Addresses []string `json:"ipV6Addresses,omitempty"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	HasCarrier bool `json:"hasCarrier,omitempty"`
	// +optional
	Product string `json:"product,omitempty"`
	// +optional
	Mtu int64 `json:"mtu,omitempty"`
	// +optional
	IPV4Addresses []string `json:"ipV4Addresses,omitempty"`
	// +optional
	Biosdevname string `json:"biosDevName,omitempty"`
	// +optional
	ClientID string `json:"clientID,omitempty"`
	// +optional
	MacAddress string `json:"macAddress,omitempty"`
	// +optional
	Flags []string `json:"flags,omitempty"`
	// +optional
	SpeedMbps int64 `json:"speedMbps,omitempty"`
}

// HostDisk is one disk of a host.
type HostDisk struct {
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	DriveType string `json:"driveType,omitempty"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
	// +optional
	Hctl string `json:"hctl,omitempty"`
	// +optional
	ByPath string `json:"byPath,omitempty"`
	// +optional
	ByID string `json:"byID,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	Wwn string `json:"wwn,omitempty"`
	// +optional
	Serial string `json:"serial,omitempty"`
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// +optional
	Bootable bool `json:"bootable,omitempty"`
	// +optional
	Smart string `json:"smart,omitempty"`
	// installationEligibility: whether the host can be installed to it.
	// +optional
	InstallationEligibility HostInstallationEligibility `json:"installationEligibility,omitempty"`
	// +optional
	IoPerf HostIOPerf `json:"ioPerf,omitempty"`
}

// HostInstallationEligibility says whether a disk can be installed to.
type HostInstallationEligibility struct {
	// +optional
	Eligible bool `json:"eligible,omitempty"`
	// +optional
	NotEligibleReasons []string `json:"notEligibleReasons,omitempty"`
}

// HostIOPerf is a disk's measured speed.
type HostIOPerf struct {
	// +optional
	SyncDurationMilliseconds int64 `json:"syncDurationMilliseconds,omitempty"`
}

// HostBoot is how a host booted.
type HostBoot struct {
	// +optional
	CurrentBootMode string `json:"currentBootMode,omitempty"`
	// +optional
	PxeInterface string `json:"pxeInterface,omitempty"`
	// +optional
	DeviceType string `json:"deviceType,omitempty"`
}

// HostSystemVendor is a host's DMI identity.
type HostSystemVendor struct {
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	ProductName string `json:"productName,omitempty"`
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	Virtual bool `json:"virtual,omitempty"`
}

// HostGPU is one GPU of a host.
type HostGPU struct {
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	VendorID string `json:"vendorId,omitempty"`
	// +optional
	DeviceID string `json:"deviceId,omitempty"`
	// +optional
	Address string `json:"address,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
}
