package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Finalizer and annotations of a BareMetalHost.
const (
	// BareMetalHostFinalizer holds a host until the engine has powered it
	// off and forgotten it.
	BareMetalHostFinalizer = "baremetalhost.metal3.io"

	// PausedAnnotation stops all reconciliation of the host while present.
	PausedAnnotation = "baremetalhost.metal3.io/paused"

	// DetachedAnnotation stops the engine from managing the host's
	// hardware; its status is still reported.
	DetachedAnnotation = "baremetalhost.metal3.io/detached"

	// RebootAnnotationPrefix requests a reboot: the annotation
	// "reboot.metal3.io" (or "reboot.metal3.io/<key>") is removed once the
	// host has been power-cycled. Its value may be {"mode":"hard"|"soft"}.
	RebootAnnotationPrefix = "reboot.metal3.io"

	// InspectAnnotation set to "disabled" skips inspection.
	InspectAnnotation = "inspect.metal3.io"

	// InspectAnnotationValueDisabled is the value of InspectAnnotation that skips inspection.
	InspectAnnotationValueDisabled = "disabled"

	// HardwareDetailsAnnotation carries a JSON HardwareDetails that the
	// engine copies to status.hardware when it does not inspect.
	HardwareDetailsAnnotation = "inspect.metal3.io/hardwaredetails"
)

// ProvisioningState is the state of a host in the engine's state machine.
type ProvisioningState string

// The states of a host.
const (
	StateNone                    ProvisioningState = ""
	StateUnmanaged               ProvisioningState = "unmanaged"
	StateRegistering             ProvisioningState = "registering"
	StateInspecting              ProvisioningState = "inspecting"
	StatePreparing               ProvisioningState = "preparing"
	StateAvailable               ProvisioningState = "available"
	StateProvisioning            ProvisioningState = "provisioning"
	StateProvisioned             ProvisioningState = "provisioned"
	StateDeprovisioning          ProvisioningState = "deprovisioning"
	StateExternallyProvisioned   ProvisioningState = "externally provisioned"
	StatePoweringOffBeforeDelete ProvisioningState = "powering off before delete"
	StateDeleting                ProvisioningState = "deleting"
)

// OperationalStatus summarises whether the host can be managed.
type OperationalStatus string

// Operational statuses.
const (
	OperationalStatusOK         OperationalStatus = "OK"
	OperationalStatusDiscovered OperationalStatus = "discovered"
	OperationalStatusError      OperationalStatus = "error"
	OperationalStatusDelayed    OperationalStatus = "delayed"
	OperationalStatusDetached   OperationalStatus = "detached"
	OperationalStatusServicing  OperationalStatus = "servicing"
)

// ErrorType classifies the error a host is in.
type ErrorType string

// Error types.
const (
	ProvisionedRegistrationError ErrorType = "provisioned registration error"
	RegistrationError            ErrorType = "registration error"
	InspectionError              ErrorType = "inspection error"
	PreparationError             ErrorType = "preparation error"
	ProvisioningError            ErrorType = "provisioning error"
	PowerManagementError         ErrorType = "power management error"
	DetachError                  ErrorType = "detach error"
	ServicingError               ErrorType = "servicing error"
)

// BootMode is how the host firmware boots.
// +kubebuilder:validation:Enum=UEFI;UEFISecureBoot;legacy
type BootMode string

// Boot modes.
const (
	UEFI           BootMode = "UEFI"
	UEFISecureBoot BootMode = "UEFISecureBoot"
	Legacy         BootMode = "legacy"
)

// AutomatedCleaningMode says whether disks are cleaned around provisioning.
// +kubebuilder:validation:Enum=metadata;disabled
type AutomatedCleaningMode string

// Cleaning modes.
const (
	CleaningModeMetadata AutomatedCleaningMode = "metadata"
	CleaningModeDisabled AutomatedCleaningMode = "disabled"
)

// ChecksumType is the algorithm of an image checksum.
// +kubebuilder:validation:Enum=md5;sha256;sha512;auto
type ChecksumType string

// Checksum algorithms.
const (
	MD5          ChecksumType = "md5"
	SHA256       ChecksumType = "sha256"
	SHA512       ChecksumType = "sha512"
	AutoChecksum ChecksumType = "auto"
)

// BMCDetails says how to reach the host's baseboard management controller.
type BMCDetails struct {
	// address is the BMC URL; its scheme picks the driver: ipmi://host[:port],
	// redfish://host[:port]/redfish/v1/Systems/<id> (HTTPS),
	// redfish+http://, redfish+https://, redfish-virtualmedia://.
	// +kubebuilder:validation:Pattern=`^(ipmi|(redfish|redfish-virtualmedia|idrac-virtualmedia|ilo5-virtualmedia)(\+https?)?)://[^\s/]+.*$`
	Address string `json:"address"`

	// credentialsName is the Secret, in the host's namespace, with the keys
	// "username" and "password".
	// +kubebuilder:validation:MinLength=1
	CredentialsName string `json:"credentialsName"`

	// disableCertificateVerification accepts any BMC certificate. Insecure.
	// +optional
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
}

// RootDeviceHints select the disk the image is written to; every hint set must match.
type RootDeviceHints struct {
	// deviceName is a Linux device name such as /dev/sda, matched exactly.
	DeviceName string `json:"deviceName,omitempty"`
	// hctl is a SCSI address such as 0:0:0:0, matched exactly.
	HCTL string `json:"hctl,omitempty"`
	// model is a substring of the device model.
	Model string `json:"model,omitempty"`
	// vendor is a substring of the device vendor.
	Vendor string `json:"vendor,omitempty"`
	// serialNumber is matched exactly.
	SerialNumber string `json:"serialNumber,omitempty"`
	// minSizeGigabytes is the smallest acceptable size in GB.
	// +kubebuilder:validation:Minimum=0
	MinSizeGigabytes int `json:"minSizeGigabytes,omitempty"`
	// wwn is matched exactly.
	WWN string `json:"wwn,omitempty"`
	// wwnWithExtension is matched exactly.
	WWNWithExtension string `json:"wwnWithExtension,omitempty"`
	// wwnVendorExtension is matched exactly.
	WWNVendorExtension string `json:"wwnVendorExtension,omitempty"`
	// rotational selects spinning (true) or solid-state (false) disks.
	Rotational *bool `json:"rotational,omitempty"`
}

// Image is an OS image to write to the host's root disk.
type Image struct {
	// url is where the image is downloaded from.
	URL string `json:"url"`
	// checksum of the image; required unless the format is live-iso.
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// checksumType is the algorithm of checksum; md5 when empty.
	// +optional
	ChecksumType ChecksumType `json:"checksumType,omitempty"`
	// format of the image.
	// +kubebuilder:validation:Enum=raw;qcow2;vdi;vmdk;live-iso
	// +optional
	DiskFormat *string `json:"format,omitempty"`
}

// CustomDeploy names a deploy procedure provided by the deploy image
// instead of writing spec.image.
type CustomDeploy struct {
	// method is the name of the procedure, e.g. start_assisted_install.
	Method string `json:"method"`
}

// BareMetalHostSpec is the desired state of a host.
type BareMetalHostSpec struct {
	// bmc says how to reach the host's management controller.
	// +optional
	BMC BMCDetails `json:"bmc,omitempty"`

	// hardwareProfile is kept for compatibility; it has no effect.
	// +optional
	HardwareProfile string `json:"hardwareProfile,omitempty"`

	// rootDeviceHints select the disk the image is written to.
	// +optional
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`

	// bootMode is the firmware boot mode; UEFI when empty.
	// +optional
	BootMode BootMode `json:"bootMode,omitempty"`

	// bootMACAddress is the MAC address of the NIC the host boots from over the network.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`
	// +optional
	BootMACAddress string `json:"bootMACAddress,omitempty"`

	// online is whether the host should be powered on; the engine enforces it
	// in stable states.
	Online bool `json:"online"`

	// consumerRef marks the host as used by something, such as a Machine.
	// +optional
	ConsumerRef *corev1.ObjectReference `json:"consumerRef,omitempty"`

	// image, when set, makes the engine provision the host with it.
	// +optional
	Image *Image `json:"image,omitempty"`

	// userData is the Secret (key "userData" or "value") given to the
	// first-boot software (ignition, cloud-init).
	// +optional
	UserData *corev1.SecretReference `json:"userData,omitempty"`

	// preprovisioningNetworkDataName is a Secret with network configuration
	// for the deploy image, and for the installed OS unless networkData is set.
	// +optional
	PreprovisioningNetworkDataName string `json:"preprovisioningNetworkDataName,omitempty"`

	// networkData is the Secret with network configuration for the installed OS.
	// +optional
	NetworkData *corev1.SecretReference `json:"networkData,omitempty"`

	// metaData is the Secret with metadata for the installed OS; generated when empty.
	// +optional
	MetaData *corev1.SecretReference `json:"metaData,omitempty"`

	// description is free text for people.
	// +optional
	Description string `json:"description,omitempty"`

	// externallyProvisioned means something else installed the host; the
	// engine only manages its power.
	// +optional
	ExternallyProvisioned bool `json:"externallyProvisioned,omitempty"`

	// automatedCleaningMode is whether disk metadata is wiped on
	// deprovisioning.
	// +kubebuilder:default:=metadata
	// +optional
	AutomatedCleaningMode AutomatedCleaningMode `json:"automatedCleaningMode,omitempty"`

	// customDeploy runs a deploy procedure of the deploy image instead of
	// writing an image.
	// +optional
	CustomDeploy *CustomDeploy `json:"customDeploy,omitempty"`

	// architecture of the host CPU, e.g. x86_64; filled by inspection when empty.
	// +optional
	Architecture string `json:"architecture,omitempty"`
}

// ClockSpeed is a frequency in MHz.
// +kubebuilder:validation:Format=double
type ClockSpeed float64

// Capacity is a size in bytes.
type Capacity int64

// CPU describes the host's processors.
type CPU struct {
	Arch           string     `json:"arch,omitempty"`
	Model          string     `json:"model,omitempty"`
	ClockMegahertz ClockSpeed `json:"clockMegahertz,omitempty"`
	Flags          []string   `json:"flags,omitempty"`
	Count          int        `json:"count,omitempty"`
}

// DiskType is HDD, SSD or NVME.
type DiskType string

// Storage describes one disk.
type Storage struct {
	// name is a stable Linux device name where one exists.
	Name string `json:"name,omitempty"`
	// alternateNames are other device names, e.g. /dev/sda.
	AlternateNames []string `json:"alternateNames,omitempty"`
	Rotational     bool     `json:"rotational,omitempty"`
	// +kubebuilder:validation:Enum=HDD;SSD;NVME;""
	Type               DiskType `json:"type,omitempty"`
	SizeBytes          Capacity `json:"sizeBytes,omitempty"`
	Vendor             string   `json:"vendor,omitempty"`
	Model              string   `json:"model,omitempty"`
	SerialNumber       string   `json:"serialNumber,omitempty"`
	WWN                string   `json:"wwn,omitempty"`
	WWNVendorExtension string   `json:"wwnVendorExtension,omitempty"`
	WWNWithExtension   string   `json:"wwnWithExtension,omitempty"`
	HCTL               string   `json:"hctl,omitempty"`
}

// NIC describes one network interface.
type NIC struct {
	Name  string `json:"name,omitempty"`
	Model string `json:"model,omitempty"`
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`
	MAC       string `json:"mac,omitempty"`
	IP        string `json:"ip,omitempty"`
	SpeedGbps int    `json:"speedGbps,omitempty"`
	PXE       bool   `json:"pxe,omitempty"`
}

// HardwareSystemVendor identifies the machine.
type HardwareSystemVendor struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	ProductName  string `json:"productName,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
}

// BIOS describes the system firmware.
type BIOS struct {
	Date    string `json:"date,omitempty"`
	Vendor  string `json:"vendor,omitempty"`
	Version string `json:"version,omitempty"`
}

// Firmware describes the host's firmware.
type Firmware struct {
	BIOS BIOS `json:"bios,omitempty"`
}

// HardwareDetails is what inspection found on the host.
type HardwareDetails struct {
	SystemVendor HardwareSystemVendor `json:"systemVendor,omitempty"`
	Firmware     Firmware             `json:"firmware,omitempty"`
	RAMMebibytes int                  `json:"ramMebibytes,omitempty"`
	NIC          []NIC                `json:"nics,omitempty"`
	Storage      []Storage            `json:"storage,omitempty"`
	CPU          CPU                  `json:"cpu,omitempty"`
	Hostname     string               `json:"hostname,omitempty"`
}

// CredentialsStatus records which version of the credentials Secret was used.
type CredentialsStatus struct {
	Reference *corev1.SecretReference `json:"credentials,omitempty"`
	Version   string                  `json:"credentialsVersion,omitempty"`
}

// OperationMetric is when an operation started and ended.
type OperationMetric struct {
	// +nullable
	Start metav1.Time `json:"start,omitempty"`
	// +nullable
	End metav1.Time `json:"end,omitempty"`
}

// OperationHistory records the timing of each phase of the host's life.
type OperationHistory struct {
	Register    OperationMetric `json:"register,omitempty"`
	Inspect     OperationMetric `json:"inspect,omitempty"`
	Provision   OperationMetric `json:"provision,omitempty"`
	Deprovision OperationMetric `json:"deprovision,omitempty"`
}

// ProvisionStatus is where the host is in its lifecycle and what is on it.
type ProvisionStatus struct {
	// state of the host in the engine's state machine.
	// +optional
	State ProvisioningState `json:"state"`
	// ID of the host in the engine.
	// +optional
	ID string `json:"ID"`
	// image last written to the host.
	// +optional
	Image Image `json:"image,omitempty"`
	// rootDeviceHints used for the image.
	// +optional
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`
	// bootMode used to provision.
	// +optional
	BootMode BootMode `json:"bootMode,omitempty"`
	// customDeploy applied to the host.
	// +optional
	CustomDeploy *CustomDeploy `json:"customDeploy,omitempty"`
}

// DeployAgentStatus records a deploy agent request and its report.
type DeployAgentStatus struct {
	// request is what the engine wants the agent to do now; nil when nothing.
	// +optional
	Request *DeployAgentRequest `json:"request,omitempty"`
	// report is the agent's last report for the request. A deploy server
	// writes it when the agent reports; the engine acts on it.
	// +optional
	Report *DeployAgentReport `json:"report,omitempty"`
	// token records the agent token of the request: a deploy server hands
	// it out once, to the first boot of the agent that presents the
	// request's ticket, and writes this record; only the token's SHA-256
	// is kept.
	// +optional
	Token *DeployAgentToken `json:"token,omitempty"`
}

// DeployAgentToken records the agent token handed out for a request, and
// the asks for it after that.
type DeployAgentToken struct {
	// generation of the request the token is for.
	// +kubebuilder:validation:MinLength=1
	Generation string `json:"generation"`
	// sha256 is the hex SHA-256 of the token.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SHA256 string `json:"sha256"`
	// issuedAt is when the token was handed out.
	IssuedAt metav1.Time `json:"issuedAt"`
	// session identifies the boot of the agent the token was handed to;
	// the request takes reports of that session only.
	// +kubebuilder:validation:MaxLength=64
	Session string `json:"session"`
	// source is the address the token was handed to, as the deploy server
	// saw it.
	// +optional
	Source string `json:"source,omitempty"`
	// refusals counts the asks for the token after it was handed out: each
	// is another boot of the agent, or someone else holding the request's
	// ticket.
	// +optional
	Refusals int32 `json:"refusals,omitempty"`
	// lastRefusalTime is when the token was last asked for again.
	// +optional
	LastRefusalTime *metav1.Time `json:"lastRefusalTime,omitempty"`
	// lastRefusalSource is the address that last asked for it again.
	// +optional
	LastRefusalSource string `json:"lastRefusalSource,omitempty"`
}

// DeployAgentRequest is one request to the deploy agent.
type DeployAgentRequest struct {
	// action is deploy, clean, inspect or custom-deploy.
	// +kubebuilder:validation:Enum=deploy;clean;inspect;custom-deploy
	Action string `json:"action"`
	// generation identifies the request; the agent's reports carry it back.
	// +kubebuilder:validation:MinLength=1
	Generation string `json:"generation"`
	// image to write, copied from spec.image when the request was made (a
	// changed spec makes a new request).
	// +optional
	Image *Image `json:"image,omitempty"`
	// customDeploy is the method a custom-deploy request runs, copied
	// from spec.customDeploy when the request was made.
	// +optional
	CustomDeploy *CustomDeploy `json:"customDeploy,omitempty"`
	// bootStartedAt is when the engine started booting the deploy image
	// for this request, written before the host is powered on: a host
	// booting from the network gets its boot script from then on.
	// +optional
	BootStartedAt *metav1.Time `json:"bootStartedAt,omitempty"`
	// bootedAt is when the engine booted the deploy image for this request;
	// unset while it has not yet.
	// +optional
	BootedAt *metav1.Time `json:"bootedAt,omitempty"`
}

// DeployAgentReport is what the agent last reported.
type DeployAgentReport struct {
	// generation of the request the report is about.
	Generation string `json:"generation"`
	// phase is running, done or failed.
	// +kubebuilder:validation:Enum=running;done;failed
	Phase string `json:"phase"`
	// message says why a request failed.
	// +optional
	Message string `json:"message,omitempty"`
	// rootDevice is the disk the image went to.
	// +optional
	RootDevice string `json:"rootDevice,omitempty"`
	// bytesWritten by a deploy.
	// +optional
	BytesWritten int64 `json:"bytesWritten,omitempty"`
	// hardwareDetails is what the agent found, in the done report of an
	// inspect request (in-band inspection).
	// +optional
	HardwareDetails *HardwareDetails `json:"hardwareDetails,omitempty"`
	// session identifies the boot of the agent that claimed the request:
	// once an agent has reported running, no other boot of an agent may
	// take the same request, so a disk is written at most once per request.
	Session string `json:"session"`
	// time is when the report arrived.
	Time metav1.Time `json:"time"`
}

// BareMetalHostStatus is the observed state of a host.
type BareMetalHostStatus struct {
	// operationalStatus summarises whether the host can be managed.
	// +kubebuilder:validation:Enum="";OK;discovered;error;delayed;detached;servicing
	// +optional
	OperationalStatus OperationalStatus `json:"operationalStatus"`

	// errorType classifies the last error; empty when there is none.
	// +kubebuilder:validation:Enum="";provisioned registration error;registration error;inspection error;preparation error;provisioning error;power management error;detach error;servicing error
	// +optional
	ErrorType ErrorType `json:"errorType,omitempty"`

	// lastUpdated is when the status last changed.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`

	// hardwareProfile is kept for compatibility.
	// +optional
	HardwareProfile string `json:"hardwareProfile,omitempty"`

	// hardware is what inspection found.
	// +optional
	HardwareDetails *HardwareDetails `json:"hardware,omitempty"`

	// provisioning is where the host is in its lifecycle.
	// +optional
	Provisioning ProvisionStatus `json:"provisioning"`

	// goodCredentials are the last credentials that worked.
	// +optional
	GoodCredentials CredentialsStatus `json:"goodCredentials,omitempty"`

	// triedCredentials are the last credentials tried.
	// +optional
	TriedCredentials CredentialsStatus `json:"triedCredentials,omitempty"`

	// errorMessage says what went wrong and what to do about it.
	// +optional
	ErrorMessage string `json:"errorMessage"`

	// poweredOn is the power state last read from the BMC.
	// +optional
	PoweredOn bool `json:"poweredOn"`

	// operationHistory records the timing of each phase.
	// +optional
	OperationHistory OperationHistory `json:"operationHistory,omitempty"`

	// errorCount counts errors since the last success; it drives the backoff.
	// +kubebuilder:default:=0
	// +optional
	ErrorCount int `json:"errorCount"`

	// deployAgent is metalshift's record of its deploy agent on this host:
	// what the engine asked it to do and what it last reported. It is the
	// only place this state lives, so any engine or deploy-server replica
	// can pick up where another stopped. Not part of metal3's API.
	// +optional
	DeployAgent *DeployAgentStatus `json:"deployAgent,omitempty"`

	// conditions of the host.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bmh;bmhost,categories=metal3;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.operationalStatus",description="Operational status",priority=1
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.provisioning.state",description="Provisioning status"
// +kubebuilder:printcolumn:name="Consumer",type="string",JSONPath=".spec.consumerRef.name",description="Consumer using this host"
// +kubebuilder:printcolumn:name="BMC",type="string",JSONPath=".spec.bmc.address",description="Address of management controller",priority=1
// +kubebuilder:printcolumn:name="Online",type="string",JSONPath=".spec.online",description="Whether the host is online or not"
// +kubebuilder:printcolumn:name="Error",type="string",JSONPath=".status.errorType",description="Type of the most recent error"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time duration since creation of BaremetalHost"

// BareMetalHost is a physical machine managed through its BMC.
type BareMetalHost struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BareMetalHostSpec   `json:"spec,omitempty"`
	Status BareMetalHostStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BareMetalHostList is a list of BareMetalHosts.
type BareMetalHostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BareMetalHost `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &BareMetalHost{}, &BareMetalHostList{})
}

// GetConditions returns the conditions, for sigs.k8s.io/cluster-api/util/conditions.
func (h *BareMetalHost) GetConditions() []metav1.Condition { return h.Status.Conditions }

// SetConditions sets the conditions, for sigs.k8s.io/cluster-api/util/conditions.
func (h *BareMetalHost) SetConditions(c []metav1.Condition) { h.Status.Conditions = c }

// BootModeOrDefault returns the boot mode, UEFI when unset.
func (h *BareMetalHost) BootModeOrDefault() BootMode {
	if h.Spec.BootMode == "" {
		return UEFI
	}
	return h.Spec.BootMode
}

// InspectionDisabled reports whether the inspect.metal3.io annotation disables inspection.
func (h *BareMetalHost) InspectionDisabled() bool {
	return h.Annotations[InspectAnnotation] == InspectAnnotationValueDisabled
}

// WantsProvisioning reports whether the spec asks for an image or custom deploy.
func (h *BareMetalHost) WantsProvisioning() bool {
	return (h.Spec.Image != nil && h.Spec.Image.URL != "") || (h.Spec.CustomDeploy != nil && h.Spec.CustomDeploy.Method != "")
}

// DeployAgentRequest returns the host's current deploy agent request, or nil.
func (h *BareMetalHost) DeployAgentRequest() *DeployAgentRequest {
	if h.Status.DeployAgent == nil {
		return nil
	}
	return h.Status.DeployAgent.Request
}

// DeployAgentReport returns the agent's report for the host's current
// request, or nil.
func (h *BareMetalHost) DeployAgentReport() *DeployAgentReport {
	req := h.DeployAgentRequest()
	if req == nil || h.Status.DeployAgent.Report == nil || h.Status.DeployAgent.Report.Generation != req.Generation {
		return nil
	}
	return h.Status.DeployAgent.Report
}

// DeployAgentToken returns the record of the agent token handed out for
// the host's current request, or nil while none was.
func (h *BareMetalHost) DeployAgentToken() *DeployAgentToken {
	req := h.DeployAgentRequest()
	if req == nil || h.Status.DeployAgent.Token == nil || h.Status.DeployAgent.Token.Generation != req.Generation {
		return nil
	}
	return h.Status.DeployAgent.Token
}

// ProvisionedMatchesSpec reports whether what is on the host is what the spec asks for.
func (h *BareMetalHost) ProvisionedMatchesSpec() bool {
	st := h.Status.Provisioning
	if h.Spec.CustomDeploy != nil && h.Spec.CustomDeploy.Method != "" {
		return st.CustomDeploy != nil && st.CustomDeploy.Method == h.Spec.CustomDeploy.Method
	}
	return h.Spec.Image != nil && st.Image.URL == h.Spec.Image.URL && st.Image.Checksum == h.Spec.Image.Checksum
}
