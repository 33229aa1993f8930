package equinixapi

import (
	"encoding/json"
	"errors"
	"time"
)

// APIPrefix is the path every API call starts with.
const APIPrefix = "/metal/v1"

// Headers of the API.
const (
	// AuthHeader carries the user's or the project's API key.
	AuthHeader = "X-Auth-Token"
	// ConsumerTokenHeader names the calling program (informational).
	ConsumerTokenHeader = "X-Consumer-Token"
	// RateLimitLimitHeader is how many calls the key may make in the
	// current window.
	RateLimitLimitHeader = "X-RateLimit-Limit"
	// RateLimitRemainingHeader is how many of them are left.
	RateLimitRemainingHeader = "X-RateLimit-Remaining"
	// RateLimitResetHeader is when the window ends, in Unix seconds.
	RateLimitResetHeader = "X-RateLimit-Reset"
)

// Metadata service paths.
const (
	MetadataPath = "/metadata"
	UserdataPath = "/userdata"
)

// Device states. A device is queued, then provisioning, then active; a
// delete takes it through deprovisioning to deleted (then it is gone);
// power actions go through powering_on / powering_off to active /
// inactive; a reinstall through reinstalling to active; a device that
// cannot be provisioned ends failed.
const (
	StateQueued         = "queued"
	StateProvisioning   = "provisioning"
	StateActive         = "active"
	StateInactive       = "inactive"
	StatePoweringOn     = "powering_on"
	StatePoweringOff    = "powering_off"
	StateReinstalling   = "reinstalling"
	StateDeprovisioning = "deprovisioning"
	StateDeleted        = "deleted"
	StateFailed         = "failed"
)

// Device action types (DeviceActionInput.Type).
const (
	ActionPowerOn   = "power_on"
	ActionPowerOff  = "power_off"
	ActionReboot    = "reboot"
	ActionReinstall = "reinstall"
)

// OSCustomIPXE is the operating system slug of a device that boots an
// iPXE script: DeviceCreateInput.IPXEScriptURL, or userdata that starts
// with IPXEUserdataPrefix.
const OSCustomIPXE = "custom_ipxe"

// IPXEUserdataPrefix starts userdata that is an iPXE script.
const IPXEUserdataPrefix = "#!ipxe"

// HardwareReservationNextAvailable asks for any of the project's free
// hardware reservations in the metro.
const HardwareReservationNextAvailable = "next-available"

// Billing cycles.
const (
	BillingHourly  = "hourly"
	BillingDaily   = "daily"
	BillingMonthly = "monthly"
	BillingYearly  = "yearly"
)

// IP reservation types.
const (
	IPTypePublicIPv4  = "public_ipv4"
	IPTypePrivateIPv4 = "private_ipv4"
	IPTypeGlobalIPv4  = "global_ipv4"
	IPTypePublicIPv6  = "public_ipv6"
)

// IP reservation states.
const (
	IPStateCreated = "created"
	IPStatePending = "pending"
)

// BondModeLACP is the bond mode of the metadata's network (802.3ad).
const BondModeLACP = 4

// Href points at another object of the API: its path under APIPrefix,
// and its ID where the API gives it.
type Href struct {
	ID   string `json:"id,omitempty"`
	Href string `json:"href"`
}

// Meta is the pagination block of a list. The links are nil where there
// is no such page.
type Meta struct {
	First       *Href `json:"first,omitempty"`
	Last        *Href `json:"last,omitempty"`
	Next        *Href `json:"next,omitempty"`
	Previous    *Href `json:"previous,omitempty"`
	Self        *Href `json:"self,omitempty"`
	Total       int   `json:"total"`
	CurrentPage int   `json:"current_page"`
	LastPage    int   `json:"last_page"`
}

// ErrorResponse is the body of every error answer: the API lists its
// messages in Errors; the metadata service says one in Error.
type ErrorResponse struct {
	Errors []string `json:"errors,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Project owns devices and IP reservations.
type Project struct {
	ID        string    `json:"id"`
	Href      string    `json:"href"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ProjectCreateInput creates a project.
type ProjectCreateInput struct {
	Name string `json:"name"`
}

// ProjectList is a page of projects.
type ProjectList struct {
	Projects []Project `json:"projects"`
	Meta     Meta      `json:"meta"`
}

// Metro is a metropolitan area holding facilities.
type Metro struct {
	ID      string `json:"id"`
	Code    string `json:"code"`
	Name    string `json:"name"`
	Country string `json:"country"`
}

// MetroList lists the metros.
type MetroList struct {
	Metros []Metro `json:"metros"`
}

// Facility is a data center (deprecated in favour of metros, still
// accepted).
type Facility struct {
	ID    string `json:"id"`
	Code  string `json:"code"`
	Name  string `json:"name"`
	Metro *Metro `json:"metro,omitempty"`
}

// Plan is a machine type.
type Plan struct {
	ID          string    `json:"id"`
	Slug        string    `json:"slug"`
	Name        string    `json:"name"`
	Class       string    `json:"class"`
	Line        string    `json:"line"`
	Description string    `json:"description,omitempty"`
	Specs       PlanSpecs `json:"specs"`
	// AvailableInMetros lists the metros (their codes) that have devices
	// of the plan.
	AvailableInMetros []string `json:"available_in_metros,omitempty"`
}

// PlanSpecs is a plan's hardware, in short.
type PlanSpecs struct {
	CPUs   int    `json:"cpus"`
	Memory string `json:"memory"`
	Drives string `json:"drives"`
	NICs   int    `json:"nics"`
}

// PlanList lists the plans.
type PlanList struct {
	Plans []Plan `json:"plans"`
}

// OperatingSystem is what a device can be provisioned with.
type OperatingSystem struct {
	ID      string `json:"id"`
	Slug    string `json:"slug"`
	Name    string `json:"name"`
	Distro  string `json:"distro"`
	Version string `json:"version"`
	// ProvisionableOn lists the plans (their slugs) it installs on.
	ProvisionableOn []string `json:"provisionable_on,omitempty"`
}

// OperatingSystemList lists the operating systems.
type OperatingSystemList struct {
	OperatingSystems []OperatingSystem `json:"operating_systems"`
}

// Device is a machine.
type Device struct {
	ID                     string           `json:"id"`
	ShortID                string           `json:"short_id"`
	Href                   string           `json:"href"`
	Hostname               string           `json:"hostname"`
	Description            string           `json:"description,omitempty"`
	State                  string           `json:"state"`
	Tags                   []string         `json:"tags"`
	BillingCycle           string           `json:"billing_cycle"`
	AlwaysPXE              bool             `json:"always_pxe"`
	IPXEScriptURL          string           `json:"ipxe_script_url,omitempty"`
	Userdata               string           `json:"userdata,omitempty"`
	Customdata             map[string]any   `json:"customdata,omitempty"`
	Locked                 bool             `json:"locked"`
	Plan                   *Plan            `json:"plan,omitempty"`
	OperatingSystem        *OperatingSystem `json:"operating_system,omitempty"`
	Metro                  *Metro           `json:"metro,omitempty"`
	Facility               *Facility        `json:"facility,omitempty"`
	Project                *Href            `json:"project,omitempty"`
	IPAddresses            []IPAssignment   `json:"ip_addresses"`
	NetworkPorts           []NetworkPort    `json:"network_ports"`
	HardwareReservation    *Href            `json:"hardware_reservation,omitempty"`
	ProvisioningPercentage float64          `json:"provisioning_percentage,omitempty"`
	CreatedAt              time.Time        `json:"created_at"`
	UpdatedAt              time.Time        `json:"updated_at"`
}

// NetworkPort is a NIC of a device, or the bond over them.
type NetworkPort struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Type string          `json:"type"` // NIC or NetworkBondPort
	Data NetworkPortData `json:"data"`
	// Bond names the bond a NIC is in.
	Bond *NetworkPortBond `json:"bond,omitempty"`
}

// NetworkPortData is a port's MAC address (NICs only) and whether it is
// bonded.
type NetworkPortData struct {
	MAC    string `json:"mac,omitempty"`
	Bonded bool   `json:"bonded"`
}

// NetworkPortBond names a NIC's bond.
type NetworkPortBond struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
}

// Port types.
const (
	PortTypeNIC  = "NIC"
	PortTypeBond = "NetworkBondPort"
)

// HardwareReservation is a server reserved for a project: a device
// created with its ID (or with HardwareReservationNextAvailable) runs on
// it.
type HardwareReservation struct {
	ID        string    `json:"id"`
	Href      string    `json:"href"`
	ShortID   string    `json:"short_id"`
	Plan      *Plan     `json:"plan,omitempty"`
	Metro     *Metro    `json:"metro,omitempty"`
	Facility  *Facility `json:"facility,omitempty"`
	Project   *Href     `json:"project,omitempty"`
	Device    *Href     `json:"device,omitempty"`
	Spare     bool      `json:"spare"`
	CreatedAt time.Time `json:"created_at"`
	// Provisionable says no device runs on it.
	Provisionable bool `json:"provisionable"`
}

// HardwareReservationList is a page of a project's hardware reservations.
type HardwareReservationList struct {
	HardwareReservations []HardwareReservation `json:"hardware_reservations"`
	Meta                 Meta                  `json:"meta"`
}

// DeviceList is a page of devices.
type DeviceList struct {
	Devices []Device `json:"devices"`
	Meta    Meta     `json:"meta"`
}

// DeviceCreateInput creates a device in a metro (Metro) or, deprecated, a
// facility (Facility: one code or an ordered list, "any" allowed).
type DeviceCreateInput struct {
	Metro                 string         `json:"metro,omitempty"`
	Facility              StringOrList   `json:"facility,omitempty"`
	Plan                  string         `json:"plan"`
	OperatingSystem       string         `json:"operating_system"`
	Hostname              string         `json:"hostname,omitempty"`
	Description           string         `json:"description,omitempty"`
	BillingCycle          string         `json:"billing_cycle,omitempty"`
	Userdata              string         `json:"userdata,omitempty"`
	IPXEScriptURL         string         `json:"ipxe_script_url,omitempty"`
	AlwaysPXE             bool           `json:"always_pxe,omitempty"`
	Tags                  []string       `json:"tags,omitempty"`
	Customdata            map[string]any `json:"customdata,omitempty"`
	HardwareReservationID string         `json:"hardware_reservation_id,omitempty"`
	Locked                bool           `json:"locked,omitempty"`
}

// StringOrList is a JSON string or a list of strings (a device's
// facility); it is written as a string when it holds one.
type StringOrList []string

// UnmarshalJSON reads a string or a list of strings.
func (s *StringOrList) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*s = StringOrList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New("want a string or a list of strings")
	}
	*s = list
	return nil
}

// MarshalJSON writes one value as a string, several as a list.
func (s StringOrList) MarshalJSON() ([]byte, error) {
	if len(s) == 1 {
		return json.Marshal(s[0])
	}
	return json.Marshal([]string(s))
}

// DeviceUpdateInput changes a device; nil fields stay as they are, Tags
// (when set) replaces every tag.
type DeviceUpdateInput struct {
	Hostname      *string         `json:"hostname,omitempty"`
	Description   *string         `json:"description,omitempty"`
	BillingCycle  *string         `json:"billing_cycle,omitempty"`
	Userdata      *string         `json:"userdata,omitempty"`
	IPXEScriptURL *string         `json:"ipxe_script_url,omitempty"`
	AlwaysPXE     *bool           `json:"always_pxe,omitempty"`
	Locked        *bool           `json:"locked,omitempty"`
	Tags          *[]string       `json:"tags,omitempty"`
	Customdata    *map[string]any `json:"customdata,omitempty"`
}

// DeviceActionInput asks for a power action or a reinstall. A reinstall
// may change the operating system and the iPXE script.
type DeviceActionInput struct {
	Type            string `json:"type"`
	OperatingSystem string `json:"operating_system,omitempty"`
	IPXEScriptURL   string `json:"ipxe_script_url,omitempty"`
	PreserveData    bool   `json:"preserve_data,omitempty"`
	DeprovisionFast bool   `json:"deprovision_fast,omitempty"`
}

// IPAssignment is an address (a /32 of an elastic block, or a device's
// own) assigned to a device.
type IPAssignment struct {
	ID            string      `json:"id"`
	Href          string      `json:"href"`
	Address       string      `json:"address"`
	AddressFamily int         `json:"address_family"`
	Netmask       string      `json:"netmask"`
	Network       string      `json:"network"`
	Gateway       string      `json:"gateway"`
	CIDR          int         `json:"cidr"`
	Public        bool        `json:"public"`
	Management    bool        `json:"management"`
	Enabled       bool        `json:"enabled"`
	AssignedTo    *Href       `json:"assigned_to,omitempty"`
	ParentBlock   ParentBlock `json:"parent_block"`
	CreatedAt     time.Time   `json:"created_at"`
}

// ParentBlock is the block an assigned address comes from.
type ParentBlock struct {
	Network string `json:"network"`
	Netmask string `json:"netmask"`
	CIDR    int    `json:"cidr"`
	Href    string `json:"href,omitempty"`
}

// IPAssignmentInput assigns an address of one of the project's
// reservations to a device: "a.b.c.d" or "a.b.c.d/32".
type IPAssignmentInput struct {
	Address    string         `json:"address"`
	Customdata map[string]any `json:"customdata,omitempty"`
}

// IPAssignmentList lists a device's addresses.
type IPAssignmentList struct {
	IPAddresses []IPAssignment `json:"ip_addresses"`
}

// IPReservation is a block of addresses reserved for a project. A
// reservation over the project's quota is pending (no address yet) until
// approved.
type IPReservation struct {
	ID            string         `json:"id"`
	Href          string         `json:"href"`
	Type          string         `json:"type"`
	State         string         `json:"state"`
	Address       string         `json:"address,omitempty"`
	AddressFamily int            `json:"address_family"`
	Network       string         `json:"network,omitempty"`
	Netmask       string         `json:"netmask,omitempty"`
	Gateway       string         `json:"gateway,omitempty"`
	CIDR          int            `json:"cidr,omitempty"`
	Quantity      int            `json:"quantity"`
	Public        bool           `json:"public"`
	Management    bool           `json:"management"`
	GlobalIP      bool           `json:"global_ip"`
	Enabled       bool           `json:"enabled"`
	Tags          []string       `json:"tags"`
	Metro         *Metro         `json:"metro,omitempty"`
	Facility      *Facility      `json:"facility,omitempty"`
	Project       *Href          `json:"project,omitempty"`
	Assignments   []IPAssignment `json:"assignments"`
	Details       string         `json:"details,omitempty"`
	Comments      string         `json:"comments,omitempty"`
	Customdata    map[string]any `json:"customdata,omitempty"`
	CreatedAt     time.Time      `json:"created_at"`
}

// IPReservationRequest asks for a block of Quantity addresses (a power
// of two). Metro (or Facility) is required except for global_ipv4. With
// FailOnApprovalRequired a request over the project's quota is refused
// (422) instead of left pending.
type IPReservationRequest struct {
	Type                   string         `json:"type"`
	Quantity               int            `json:"quantity"`
	Metro                  string         `json:"metro,omitempty"`
	Facility               string         `json:"facility,omitempty"`
	Tags                   []string       `json:"tags,omitempty"`
	Comments               string         `json:"comments,omitempty"`
	Details                string         `json:"details,omitempty"`
	Customdata             map[string]any `json:"customdata,omitempty"`
	FailOnApprovalRequired bool           `json:"fail_on_approval_required,omitempty"`
}

// IPReservationUpdateInput changes a reservation (PATCH /ips/{id}); nil
// fields stay as they are.
type IPReservationUpdateInput struct {
	Tags       *[]string       `json:"tags,omitempty"`
	Details    *string         `json:"details,omitempty"`
	Customdata *map[string]any `json:"customdata,omitempty"`
}

// IPReservationList is a page of a project's reservations.
type IPReservationList struct {
	IPAddresses []IPReservation `json:"ip_addresses"`
	Meta        Meta            `json:"meta"`
}

// Metadata is what the metadata service tells a device about itself.
type Metadata struct {
	ID              string            `json:"id"`
	Hostname        string            `json:"hostname"`
	IQN             string            `json:"iqn"`
	Plan            string            `json:"plan"`
	Class           string            `json:"class"`
	Metro           string            `json:"metro"`
	Facility        string            `json:"facility"`
	State           string            `json:"state"`
	Tags            []string          `json:"tags"`
	SSHKeys         []string          `json:"ssh_keys"`
	OperatingSystem MetadataOS        `json:"operating_system"`
	Network         MetadataNetwork   `json:"network"`
	Customdata      map[string]any    `json:"customdata"`
	PrivateSubnets  []string          `json:"private_subnets"`
	APIURL          string            `json:"api_url,omitempty"`
	PhoneHomeURL    string            `json:"phone_home_url,omitempty"`
	Volumes         []json.RawMessage `json:"volumes"`
}

// MetadataOS is the device's operating system.
type MetadataOS struct {
	Slug    string `json:"slug"`
	Distro  string `json:"distro"`
	Version string `json:"version"`
}

// MetadataNetwork is the device's network: its bond, its NICs and every
// address it should configure.
type MetadataNetwork struct {
	Bonding    MetadataBonding     `json:"bonding"`
	Interfaces []MetadataInterface `json:"interfaces"`
	Addresses  []MetadataAddress   `json:"addresses"`
}

// MetadataBonding is the bond's mode (BondModeLACP).
type MetadataBonding struct {
	Mode int `json:"mode"`
}

// MetadataInterface is a NIC, with the bond it is in.
type MetadataInterface struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
	Bond string `json:"bond"`
}

// MetadataAddress is an address to configure on the bond.
type MetadataAddress struct {
	ID            string       `json:"id"`
	AddressFamily int          `json:"address_family"`
	Public        bool         `json:"public"`
	Management    bool         `json:"management"`
	Enabled       bool         `json:"enabled"`
	Address       string       `json:"address"`
	Netmask       string       `json:"netmask"`
	Gateway       string       `json:"gateway"`
	Network       string       `json:"network"`
	CIDR          int          `json:"cidr"`
	ParentBlock   *ParentBlock `json:"parent_block,omitempty"`
}
