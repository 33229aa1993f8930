package deployapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Version is the API version served under /deploy/<Version>/.
const Version = "v1"

// Paths of the API, relative to the engine URL.
const (
	InstructionsPath = "/deploy/v1/hosts/%s/instructions"
	StatusPath       = "/deploy/v1/hosts/%s/status"
	// TokenPath is where the agent exchanges its boot's ticket for the
	// request's agent token (POST, see TokenRequest).
	TokenPath = "/deploy/v1/hosts/%s/token" //nolint:gosec // a URL path, not a credential
)

// Actions the engine asks the agent to run.
const (
	// ActionDeploy writes the image and the config drive to the root disk.
	ActionDeploy = "deploy"
	// ActionClean wipes partition tables and signatures from every disk.
	ActionClean = "clean"
	// ActionWait means there is nothing to do yet; ask again later.
	ActionWait = "wait"
)

// Phases an agent reports.
const (
	PhaseRunning = "running"
	PhaseDone    = "done"
	PhaseFailed  = "failed"
)

// BootConfig is what the deploy image tells the agent: a small initramfs
// unpacked over the live one puts it at BootConfigFile (the live ISO's host
// region, or iPXE's second initrd).
type BootConfig struct {
	EngineURL string `json:"engineURL"`
	HostID    string `json:"hostID"`
	// Ticket is this boot's one-request ticket (SignTicket): the agent
	// exchanges it once at TokenPath for the request's agent token, and
	// it is good for nothing else.
	Ticket string `json:"ticket"`
	// CACert is the PEM of the CA that signs the engine's certificate, if
	// it serves HTTPS.
	CACert string `json:"caCert,omitempty"`
	// NetworkData is the host's network configuration for the live image
	// (nmstate YAML, from the BareMetalHost's
	// preprovisioningNetworkDataName Secret); without it every NIC with a
	// link uses DHCP.
	NetworkData string `json:"networkData,omitempty"`
	// Discovery, when set, makes the image an InfraEnv's discovery image
	// of the agent-based install: the agent registers with the agent
	// service (api/assisted/v2) instead of asking the host engine for
	// deploy instructions; EngineURL, HostID and Ticket are then empty.
	Discovery *Discovery `json:"discovery,omitempty"`
	// Lookup, when set, makes the image one for many hosts (the converged
	// flow): the agent finds its host by MAC address at the deploy server
	// (see LookupPath) and runs the deploy role; a discovery section is then
	// started only by the custom deploy method start_assisted_install.
	Lookup *Lookup `json:"lookup,omitempty"`
	// MetalCloud, when set, makes the image the installer of a metal
	// cloud's machine (Equinix Metal's custom_ipxe): the host side reads
	// the cloud's metadata service instead of asking the host engine for
	// work, configures the machine's bond and addresses from it, writes
	// Image and a config drive carrying the machine's user data, and
	// reboots into the disk. EngineURL, HostID and Ticket are then empty.
	MetalCloud *MetalCloud `json:"metalCloud,omitempty"`
}

// MetalCloud is the configuration of a metal cloud's installer image: the
// same for every machine that boots it, which learns who it is from the
// metadata service.
type MetalCloud struct {
	// MetadataURL is the base URL of the cloud's metadata service: the
	// agent reads <MetadataURL>/metadata (JSON) and <MetadataURL>/userdata
	// (an Ignition config) as the machine, which the service knows by the
	// call's source address.
	MetadataURL string `json:"metadataURL"`
	// Image is the OS image to write to the install disk.
	Image Image `json:"image"`
}

// Discovery is a discovery image's configuration: one per InfraEnv, the
// same for every host that boots it.
type Discovery struct {
	// ServiceURL is the agent service's base URL (the REST API is under
	// /api/assisted-install).
	ServiceURL string `json:"serviceURL"`
	// InfraEnvID is the InfraEnv's ID in the REST API.
	InfraEnvID string `json:"infraEnvID"`
	// Token is the InfraEnv's agent token, sent as X-Secret-Key.
	Token string `json:"token"`
	// CACert is the PEM of the CA that signs the service's certificate.
	CACert string `json:"caCert,omitempty"`
	// Proxy is the InfraEnv's proxy.
	HTTPProxy  string `json:"httpProxy,omitempty"`
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	NoProxy    string `json:"noProxy,omitempty"`
	// NTPSources are additional time sources.
	NTPSources []string `json:"ntpSources,omitempty"`
	// SSHAuthorizedKey lets a person log in to the discovery environment.
	SSHAuthorizedKey string `json:"sshAuthorizedKey,omitempty"`
	// AdditionalTrustBundle is PEM CAs the discovery environment trusts.
	AdditionalTrustBundle string `json:"additionalTrustBundle,omitempty"`
	// KernelArguments are the InfraEnv's kernel argument edits, applied
	// on the boot loader's command line.
	KernelArguments []KernelArgument `json:"kernelArguments,omitempty"`
	// StaticNetwork is the InfraEnv's NMStateConfigs: the agent applies
	// the one whose MAC addresses its NICs have.
	StaticNetwork []StaticNetworkHost `json:"staticNetwork,omitempty"`
	// IgnitionConfigOverride is the InfraEnv's ignitionConfigOverride, a
	// validated Ignition 3.x config the live environment applies at boot
	// (its files, directories, links and users' SSH keys).
	IgnitionConfigOverride string `json:"ignitionConfigOverride,omitempty"`
}

// KernelArgument is an edit of the kernel command line.
type KernelArgument struct {
	// Operation is append, replace or delete.
	Operation string `json:"operation"`
	Value     string `json:"value"`
}

// StaticNetworkHost is one NMStateConfig: nmstate YAML for one host, and
// the MAC address of each interface it names.
type StaticNetworkHost struct {
	MACInterfaceMap []MACInterface `json:"macInterfaceMap"`
	NetworkYAML     string         `json:"networkYAML"`
}

// MACInterface maps a NIC's MAC address to the interface name in the
// nmstate YAML.
type MACInterface struct {
	MACAddress     string `json:"macAddress"`
	LogicalNICName string `json:"logicalNICName"`
}

// BootConfigFile is the path of the boot configuration in the running
// live image.
const BootConfigFile = "/etc/metalshift/boot.json"

// RootDeviceHints select the disk to deploy to; see BareMetalHost.
type RootDeviceHints struct {
	DeviceName       string `json:"deviceName,omitempty"`
	HCTL             string `json:"hctl,omitempty"`
	Model            string `json:"model,omitempty"`
	Vendor           string `json:"vendor,omitempty"`
	SerialNumber     string `json:"serialNumber,omitempty"`
	MinSizeGigabytes int    `json:"minSizeGigabytes,omitempty"`
	WWN              string `json:"wwn,omitempty"`
	Rotational       *bool  `json:"rotational,omitempty"`
}

// Image is the image to write.
type Image struct {
	URL          string `json:"url"`
	Checksum     string `json:"checksum,omitempty"`
	ChecksumType string `json:"checksumType,omitempty"`
	Format       string `json:"format,omitempty"`
}

// Instructions is what the engine wants the agent to do now.
type Instructions struct {
	Action string `json:"action"`
	// Generation identifies this request; reports carry it back so that a
	// report for an older request is ignored.
	Generation string `json:"generation"`
	// Deploy only.
	Image           *Image           `json:"image,omitempty"`
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`
	// UserData, NetworkData and MetaData are written to the config drive.
	UserData    []byte `json:"userData,omitempty"`
	NetworkData []byte `json:"networkData,omitempty"`
	MetaData    []byte `json:"metaData,omitempty"`
	// CustomDeploy is the method of an ActionCustomDeploy.
	CustomDeploy string `json:"customDeploy,omitempty"`
	// RegistrationProof, for the custom deploy start_assisted_install, is
	// the host's proof for the agent service (assistedapi.HostProofHeader):
	// the discovery agent the custom deploy starts registers with it.
	RegistrationProof string `json:"registrationProof,omitempty"`
}

// StatusReport is what the agent reports.
type StatusReport struct {
	Action     string `json:"action"`
	Generation string `json:"generation"`
	Phase      string `json:"phase"`
	Message    string `json:"message,omitempty"`
	// RootDevice is the disk the image went to.
	RootDevice string `json:"rootDevice,omitempty"`
	// BytesWritten by a deploy.
	BytesWritten int64 `json:"bytesWritten,omitempty"`
	// Inventory is the machine's, in the done report of an inspect.
	Inventory *Inventory `json:"inventory,omitempty"`
	// Session is random per boot of the agent, the one it sent with its
	// TokenRequest. The first running report claims the request for that
	// session; the engine refuses reports of any other session for it
	// (409), and the agent writes nothing until its running report was
	// accepted. So a disk is written at most once per request, whichever
	// replica the agent reaches.
	Session string `json:"session"`
}

// TokenRequest is what the agent posts to TokenPath, with its boot's
// ticket as "Authorization: Bearer <ticket>". The answer is a
// TokenResponse (200) the first time the request's token is asked for,
// and 409 after that: a token is handed out once. The one exception is
// the same session asking again before any report of it was accepted (its
// answer was lost): it gets a new token, and the first stops working. 401 is a bad or expired
// ticket, 410 a ticket of a request that is not the host's current one
// or that ended.
type TokenRequest struct {
	// Session is the agent's boot (see StatusReport.Session).
	Session string `json:"session"`
}

// TokenResponse carries the request's agent token: the bearer token of
// the instructions and status calls for that request, until its report is
// final.
type TokenResponse struct {
	Token      string `json:"token"`
	Generation string `json:"generation"`
}

// MaxSessionLength bounds StatusReport.Session and TokenRequest.Session.
const MaxSessionLength = 64

// ConfigDriveLabel is the volume label of the config drive the agent
// writes after the image (an ISO 9660 filesystem in a partition at the end
// of the disk, as Ironic writes it; see agent/configdrive);
// ConfigDriveSize is the size of that partition.
const (
	ConfigDriveLabel = "config-2"
	ConfigDriveSize  = 64 << 20
)

// HostID is the engine's ID for a BareMetalHost: "<namespace>~<name>~<uid prefix>",
// safe in URL paths; the UID part keeps a recreated host from using an old token.
func HostID(namespace, name, uid string) string {
	u := strings.ReplaceAll(uid, "-", "")
	if len(u) > 12 {
		u = u[:12]
	}
	return namespace + "~" + name + "~" + u
}

// ParseHostID splits a HostID; HostID of what it returns is id.
func ParseHostID(id string) (namespace, name, uidPrefix string, err error) {
	parts := strings.Split(id, "~")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || !validUIDPrefix(parts[2]) {
		return "", "", "", fmt.Errorf("invalid host ID %q", id)
	}
	return parts[0], parts[1], parts[2], nil
}

// validUIDPrefix: what HostID keeps of a UID, up to 12 letters and digits.
func validUIDPrefix(u string) bool {
	if len(u) > 12 {
		return false
	}
	for _, c := range u {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Fingerprint returns a short stable digest of data, e.g. to make a
// Generation from what a request depends on.
func Fingerprint(data ...string) string {
	h := sha256.Sum256([]byte(strings.Join(data, "\x00")))
	return hex.EncodeToString(h[:8])
}
