package assistedapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// BasePath is the root of the REST API.
const BasePath = "/api/assisted-install"

// Paths of the API, relative to the service URL (fmt verbs: InfraEnv ID,
// host ID; cluster ID).
const (
	RegisterPath     = BasePath + "/v2/infra-envs/%s/hosts"
	InstructionsPath = BasePath + "/v2/infra-envs/%s/hosts/%s/instructions"
	ProgressPath     = BasePath + "/v2/infra-envs/%s/hosts/%s/progress"
	LogsProgressPath = BasePath + "/v2/infra-envs/%s/hosts/%s/logs-progress"
	FilesPath        = BasePath + "/v2/clusters/%s/downloads/files"
	LogsPath         = BasePath + "/v2/clusters/%s/logs"
)

// AuthHeader carries the InfraEnv's key (upstream's agentAuth), which
// only registers hosts; see HostKeyHeader.
const AuthHeader = "X-Secret-Key"

// HostCreateParams registers a host.
type HostCreateParams struct {
	HostID                string `json:"host_id"`
	DiscoveryAgentVersion string `json:"discovery_agent_version,omitempty"`
}

// StepRunnerCommand is how the agent runs its steps (upstream: the
// container it starts next); returned on registration.
type StepRunnerCommand struct {
	Command      string   `json:"command,omitempty"`
	Args         []string `json:"args,omitempty"`
	RetrySeconds int64    `json:"retry_seconds,omitempty"`
}

// Host is the service's view of a host, as registration returns it.
type Host struct {
	ID                    string             `json:"id"`
	InfraEnvID            string             `json:"infra_env_id"`
	ClusterID             string             `json:"cluster_id,omitempty"`
	Kind                  string             `json:"kind"`
	Status                string             `json:"status"`
	StatusInfo            string             `json:"status_info"`
	Role                  string             `json:"role,omitempty"`
	Bootstrap             bool               `json:"bootstrap,omitempty"`
	RequestedHostname     string             `json:"requested_hostname,omitempty"`
	NextStepRunnerCommand *StepRunnerCommand `json:"next_step_runner_command,omitempty"`
}

// HostKind values.
const (
	KindHost                     = "Host"
	KindAddToExistingClusterHost = "AddToExistingClusterHost"
)

// StepType names a step.
type StepType string

// Step types the service sends (upstream names).
const (
	StepInventory                  StepType = "inventory"
	StepConnectivityCheck          StepType = "connectivity-check"
	StepNTPSynchronizer            StepType = "ntp-synchronizer"
	StepDomainResolution           StepType = "domain-resolution"
	StepInstallationDiskSpeedCheck StepType = "installation-disk-speed-check"
	StepInstall                    StepType = "install"
	StepStopInstallation           StepType = "stop-installation"
	StepLogsGather                 StepType = "logs-gather"
)

// Post-step actions.
const (
	PostStepContinue = "continue"
	PostStepExit     = "exit"
)

// Step is one instruction.
type Step struct {
	StepType StepType `json:"step_type"`
	StepID   string   `json:"step_id"`
	// Args are the step's arguments; for the steps with a request body,
	// one JSON document (upstream passes them as a command line whose last
	// argument is that JSON).
	Args []string `json:"args,omitempty"`
}

// Steps is the answer to an instructions poll.
type Steps struct {
	NextInstructionSeconds int64  `json:"next_instruction_seconds"`
	PostStepAction         string `json:"post_step_action"`
	Instructions           []Step `json:"instructions"`
}

// StepReply is the result of a step.
type StepReply struct {
	StepType StepType `json:"step_type"`
	StepID   string   `json:"step_id"`
	ExitCode int      `json:"exit_code"`
	// Output is the step's response, a JSON document for the steps that
	// have one (Inventory, ConnectivityReport, NTPSynchronizationResponse,
	// DomainResolutionResponse, DiskSpeedCheckResponse).
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
}

// HostStage is an installation stage, upstream's enum.
type HostStage string

// Stages, in upstream's spelling.
const (
	StageStartingInstallation   HostStage = "Starting installation"
	StageWaitingForControlPlane HostStage = "Waiting for control plane"
	StageWaitingForBootkube     HostStage = "Waiting for bootkube"
	StageWaitingForController   HostStage = "Waiting for controller"
	StageInstalling             HostStage = "Installing"
	StageWritingImageToDisk     HostStage = "Writing image to disk"
	StageCopyingRegistryData    HostStage = "Copying registry data to disk"
	StageRebooting              HostStage = "Rebooting"
	StageWaitingForIgnition     HostStage = "Waiting for ignition"
	StageConfiguring            HostStage = "Configuring"
	StageJoined                 HostStage = "Joined"
	StageDone                   HostStage = "Done"
	StageFailed                 HostStage = "Failed"
)

// HostProgress is a stage report.
type HostProgress struct {
	CurrentStage HostStage `json:"current_stage"`
	ProgressInfo string    `json:"progress_info,omitempty"`
}

// Error is an error answer.
type Error struct {
	Kind   string `json:"kind,omitempty"`
	ID     int32  `json:"id,omitempty"`
	Href   string `json:"href,omitempty"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// Installation disk speed check threshold and the like are the service's;
// what follows are the step payloads.

// InstallCmdRequest is the install step's argument.
type InstallCmdRequest struct {
	ClusterID  string `json:"cluster_id"`
	HostID     string `json:"host_id"`
	InfraEnvID string `json:"infra_env_id"`
	// Role is master, worker, arbiter or bootstrap (the master that
	// bootstraps the cluster).
	Role string `json:"role"`
	// BootDevice is the installation disk's path, e.g. /dev/sda.
	BootDevice string `json:"boot_device"`
	// HighAvailabilityMode is Full, or None for a single-node cluster
	// (bootstrap in place).
	HighAvailabilityMode string `json:"high_availability_mode"`
	OpenshiftVersion     string `json:"openshift_version,omitempty"`
	// InstallerArgs are extra coreos-installer arguments (validated).
	InstallerArgs []string `json:"installer_args,omitempty"`
	// OSImage is the disk image written to BootDevice (metalshift: a raw
	// whole-disk image; upstream: what coreos-installer writes).
	OSImage OSImage `json:"os_image"`
	// IgnitionFileName is the file_name of the host's Ignition at FilesPath.
	IgnitionFileName string `json:"ignition_file_name"`
	// Hostname is the host's name in the installed cluster.
	Hostname string `json:"hostname,omitempty"`
	// BootstrapIgnitionFileName, for the bootstrap role, is the file_name
	// of the bootstrap Ignition the host runs from the live image before it
	// writes its disk.
	BootstrapIgnitionFileName string `json:"bootstrap_ignition_file_name,omitempty"`
	// ControlPlaneMasters is how many other masters the bootstrap waits
	// for ("Waiting for control plane").
	ControlPlaneMasters int `json:"control_plane_masters,omitempty"`
}

// OSImage is the image the install step writes.
type OSImage struct {
	URL          string `json:"url"`
	Checksum     string `json:"checksum,omitempty"`
	ChecksumType string `json:"checksum_type,omitempty"`
}

// High availability modes.
const (
	HighAvailabilityFull = "Full"
	HighAvailabilityNone = "None"
)

// Roles in an install step.
const (
	RoleMaster    = "master"
	RoleWorker    = "worker"
	RoleArbiter   = "arbiter"
	RoleBootstrap = "bootstrap"
)

// ConnectivityCheckParams is connectivity-check's argument: the other
// hosts' addresses.
type ConnectivityCheckParams []ConnectivityCheckHost

// ConnectivityCheckHost is one peer to check.
type ConnectivityCheckHost struct {
	HostID string                 `json:"host_id"`
	Nics   []ConnectivityCheckNic `json:"nics"`
}

// ConnectivityCheckNic is one address of a peer.
type ConnectivityCheckNic struct {
	Name        string   `json:"name,omitempty"`
	Mac         string   `json:"mac,omitempty"`
	IPAddresses []string `json:"ip_addresses"`
}

// ConnectivityReport is connectivity-check's output.
type ConnectivityReport struct {
	RemoteHosts []ConnectivityRemoteHost `json:"remote_hosts"`
}

// ConnectivityRemoteHost is what one peer answered.
type ConnectivityRemoteHost struct {
	HostID         string           `json:"host_id"`
	L3Connectivity []L3Connectivity `json:"l3_connectivity"`
}

// L3Connectivity is one address's result.
type L3Connectivity struct {
	RemoteIPAddress      string  `json:"remote_ip_address"`
	Successful           bool    `json:"successful"`
	AverageRTTMs         float64 `json:"average_rtt_ms"`
	PacketLossPercentage float64 `json:"packet_loss_percentage"`
}

// NTPSynchronizationRequest is ntp-synchronizer's argument.
type NTPSynchronizationRequest struct {
	NTPSource string `json:"ntp_source"`
}

// NTPSynchronizationResponse is ntp-synchronizer's output.
type NTPSynchronizationResponse struct {
	NTPSources []NTPSource `json:"ntp_sources"`
}

// NTPSource is one time source's state.
type NTPSource struct {
	SourceName  string `json:"source_name"`
	SourceState string `json:"source_state"`
}

// NTP source states (chrony's).
const (
	NTPSourceSynced      = "synced"
	NTPSourceUnreachable = "unreachable"
	NTPSourceNotCombined = "not_combined"
)

// DomainResolutionRequest is domain-resolution's argument.
type DomainResolutionRequest struct {
	Domains []DomainResolutionRequestDomain `json:"domains"`
}

// DomainResolutionRequestDomain is one name to resolve.
type DomainResolutionRequestDomain struct {
	DomainName string `json:"domain_name"`
}

// DomainResolutionResponse is domain-resolution's output.
type DomainResolutionResponse struct {
	Resolutions []DomainResolution `json:"resolutions"`
}

// DomainResolution is one name's addresses.
type DomainResolution struct {
	DomainName    string   `json:"domain_name"`
	IPV4Addresses []string `json:"ipv4_addresses"`
	IPV6Addresses []string `json:"ipv6_addresses"`
}

// DiskSpeedCheckRequest is installation-disk-speed-check's argument.
type DiskSpeedCheckRequest struct {
	Path string `json:"path"`
}

// DiskSpeedCheckResponse is its output: the fsync duration in ms.
type DiskSpeedCheckResponse struct {
	Path           string `json:"path"`
	IoSyncDuration int64  `json:"io_sync_duration"`
}

// ErrBadToken is returned by VerifyAgentToken.
var ErrBadToken = errors.New("invalid agent token")

// SignAgentToken returns the key of an InfraEnv (its images'
// X-Secret-Key): an HMAC of its ID with the hub's signing key. Like
// upstream's local authentication it does not expire; it stops working
// when the InfraEnv is gone (its ID is its UID) or the key changes. Since
// every copy of an image holds it, it only registers hosts.
func SignAgentToken(key []byte, infraEnvID string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte("agent-install/infra-env\x00" + infraEnvID))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// VerifyAgentToken checks an InfraEnv's key.
func VerifyAgentToken(key []byte, infraEnvID, token string) error {
	if token == "" || !hmac.Equal([]byte(token), []byte(SignAgentToken(key, infraEnvID))) {
		return ErrBadToken
	}
	return nil
}

// Path formats p with args, e.g. Path(InstructionsPath, ie, host).
func Path(p string, args ...any) string { return fmt.Sprintf(p, args...) }

// IgnitionFileName is the file_name of a host's Ignition: "<role>-<host id>.ign".
func IgnitionFileName(role, hostID string) string {
	return strings.ToLower(role) + "-" + hostID + ".ign"
}
