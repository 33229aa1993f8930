package deployapi

// ActionInspect asks the agent for the machine's inventory: in-band
// inspection, for BMCs that cannot tell (IPMI).
const ActionInspect = "inspect"

// Inventory is what the agent tells of the machine it runs on.
type Inventory struct {
	SystemVendor SystemVendor `json:"systemVendor"`
	BootMode     string       `json:"bootMode"`
	CPU          CPU          `json:"cpu"`
	MemoryBytes  int64        `json:"memoryBytes"`
	NICs         []NIC        `json:"nics"`
	Disks        []Disk       `json:"disks"`
}

// Boot modes, as BareMetalHost's spec.bootMode spells them.
const (
	BootModeUEFI   = "UEFI"
	BootModeLegacy = "legacy"
)

// SystemVendor is the machine's DMI identity.
type SystemVendor struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	ProductName  string `json:"productName,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
}

// CPU describes the processors.
type CPU struct {
	Architecture string  `json:"architecture"`
	Model        string  `json:"model,omitempty"`
	Count        int     `json:"count"`
	MHz          float64 `json:"mhz,omitempty"`
}

// NIC is a physical network interface.
type NIC struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
	// SpeedMbps is 0 when unknown (no link).
	SpeedMbps int  `json:"speedMbps,omitempty"`
	HasLink   bool `json:"hasLink"`
}

// Disk describes a block device, with the facts root device hints match.
type Disk struct {
	Name         string `json:"name"`
	Model        string `json:"model,omitempty"`
	Vendor       string `json:"vendor,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
	WWN          string `json:"wwn,omitempty"`
	HCTL         string `json:"hctl,omitempty"`
	SizeBytes    int64  `json:"sizeBytes"`
	Rotational   bool   `json:"rotational"`
}
