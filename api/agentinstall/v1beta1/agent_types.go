package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalshift/metalshift/api/assistedcommon"
)

// Annotations the service mirrors an Agent's state into.
const (
	AgentStateAnnotation           = "agent.agent-install.openshift.io/state"
	AgentRoleAnnotation            = "agent.agent-install.openshift.io/role"
	AgentInventoryAnnotation       = "agent.agent-install.openshift.io/inventory"
	AgentValidationsInfoAnnotation = "agent.agent-install.openshift.io/validations-info"
	AgentCurrentStageAnnotation    = "agent.agent-install.openshift.io/current-stage"
)

// Annotations only the agent service writes on an Agent (metalshift's).
const (
	// AgentHostCredentialAnnotation is the SHA-256 (hex) of the host's
	// credential for the agent service's REST API, or
	// AgentHostCredentialEnded once its install step succeeded. Removing
	// it ends the credential.
	AgentHostCredentialAnnotation = "metalshift.io/host-credential-sha256" //nolint:gosec // an annotation's name, not a credential
	// AgentHostCredentialEnded is AgentHostCredentialAnnotation's value
	// once the host's credential has ended.
	AgentHostCredentialEnded = "ended"
	// AgentRegisteredForHostAnnotation is "<name>/<uid>" of the
	// BareMetalHost of the Agent's namespace that the host engine started
	// its agent for: the registration carried that host's proof. BMAC
	// approves, in the converged flow, only Agents that have it.
	AgentRegisteredForHostAnnotation = "metalshift.io/registered-for-host"
)

// HostRole is a host's role in its cluster.
// +kubebuilder:validation:Enum="";master;worker;arbiter;auto-assign
type HostRole string

// Host roles.
const (
	HostRoleMaster     HostRole = "master"
	HostRoleWorker     HostRole = "worker"
	HostRoleArbiter    HostRole = "arbiter"
	HostRoleAutoAssign HostRole = "auto-assign"
)

// AgentSpec is what a person or a controller decides about a host; the
// admission webhooks (assisted/webhooks) enforce the rules stated here.
type AgentSpec struct {
	// clusterDeploymentName binds the host to a cluster; immutable while it
	// installs (except day-2 hosts).
	// +optional
	ClusterDeploymentName *ClusterReference `json:"clusterDeploymentName,omitempty"`
	// role of the host.
	// +optional
	Role HostRole `json:"role,omitempty"`
	// hostname requested for the host.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// machineConfigPool of the host.
	// +optional
	MachineConfigPool string `json:"machineConfigPool,omitempty"`
	// approved lets the host be installed; always serialized.
	Approved bool `json:"approved"`
	// installation_disk_id is the disk (inventory id) to install to;
	// exclusive with installation_disk_path.
	// +optional
	InstallationDiskID string `json:"installation_disk_id,omitempty"`
	// installation_disk_path is the disk path to install to.
	// +optional
	InstallationDiskPath string `json:"installation_disk_path,omitempty"`
	// installerArgs, a JSON array of strings, are extra coreos-installer
	// arguments.
	// +optional
	InstallerArgs string `json:"installerArgs,omitempty"`
	// ignitionConfigOverrides, as JSON, is merged into the host's ignition.
	// +optional
	IgnitionConfigOverrides string `json:"ignitionConfigOverrides,omitempty"`
	// ignitionEndpointTokenReference is a Secret with the bearer token for
	// the ignition endpoint.
	// +optional
	IgnitionEndpointTokenReference *IgnitionEndpointTokenReference `json:"ignitionEndpointTokenReference,omitempty"`
	// ignitionEndpointHTTPHeaders are sent to the ignition endpoint.
	// +optional
	IgnitionEndpointHTTPHeaders map[string]string `json:"ignitionEndpointHTTPHeaders,omitempty"`
	// nodeLabels are set on the host's Node.
	// +optional
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
	// fencingCredentialsSecretRef is a Secret with the host's fencing
	// (BMC) credentials.
	// +optional
	FencingCredentialsSecretRef *corev1.LocalObjectReference `json:"fencingCredentialsSecretRef,omitempty"`
}

// IgnitionEndpointTokenReference names a Secret with a token.
type IgnitionEndpointTokenReference struct {
	// namespace of the Secret.
	Namespace string `json:"namespace"`
	// name of the Secret.
	Name string `json:"name"`
}

// AgentStatus is the host as the service sees it. Each field has one
// writer, which writes it alone as a merge patch (docs/agent-install.md,
// status ownership): the Agent reconciler the state (debugInfo), the
// conditions, validationsInfo, role, installation_disk_id and kind; the
// agent service the agent's reports (inventory, ntpSources, and progress
// until the host's install step ends); the AgentClusterInstall reconciler
// bootstrap, csrStatus and the progress read from the installed cluster.
type AgentStatus struct {
	// bootstrap is true on the host that bootstraps the cluster.
	// +optional
	Bootstrap bool `json:"bootstrap,omitempty"`
	// role is the role chosen for an auto-assign host.
	// +optional
	Role HostRole `json:"role,omitempty"`
	// inventory is the host's hardware.
	// +optional
	Inventory HardwareInventory `json:"inventory,omitempty"`
	// progress of the host's install.
	// +optional
	Progress HostProgressInfo `json:"progress,omitempty"`
	// ntpSources the host synchronizes with.
	// +optional
	NtpSources []HostNTPSources `json:"ntpSources,omitempty"`
	// conditions, custom-resource-status shape.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// debugInfo: the service's state and where its events and logs are.
	// +optional
	DebugInfo DebugInfo `json:"debugInfo,omitempty"`
	// validationsInfo: the host validations' results by category.
	// +optional
	ValidationsInfo assistedcommon.ValidationsStatus `json:"validationsInfo,omitempty"`
	// installation_disk_id is the disk chosen for the install.
	// +optional
	InstallationDiskID string `json:"installation_disk_id,omitempty"`
	// deprovision_info is set while the host is removed from a cluster.
	// +optional
	DeprovisionInfo *DeprovisionInfo `json:"deprovision_info,omitempty"`
	// csrStatus records the node's CSRs approved for a day-2 host.
	// +optional
	CSRStatus CSRStatus `json:"csrStatus,omitempty"`
	// kind: Host, or AddToExistingClusterHost for a day-2 host.
	// +optional
	Kind string `json:"kind,omitempty"`
}

// HostProgressInfo is a host's install progress.
type HostProgressInfo struct {
	// currentStage, e.g. Writing image to disk.
	// +optional
	CurrentStage string `json:"currentStage,omitempty"`
	// progressStages are the stages the host will go through.
	// +optional
	ProgressStages []string `json:"progressStages,omitempty"`
	// progressInfo details the current stage.
	// +optional
	ProgressInfo string `json:"progressInfo,omitempty"`
	// installationPercentage of the host's install done.
	// +optional
	InstallationPercentage int64 `json:"installationPercentage,omitempty"`
	// stageStartTime is when the current stage began.
	// +optional
	StageStartTime *metav1.Time `json:"stageStartTime,omitempty"`
	// stageUpdateTime is when the current stage last reported.
	// +optional
	StageUpdateTime *metav1.Time `json:"stageUpdateTime,omitempty"`
}

// HostNTPSources is one NTP source of a host.
type HostNTPSources struct {
	// +optional
	SourceName string `json:"sourceName,omitempty"`
	// +optional
	SourceState string `json:"sourceState,omitempty"`
}

// DebugInfo is the service's view of a host.
type DebugInfo struct {
	// eventsURL lists the host's events.
	// +optional
	EventsURL string `json:"eventsURL,omitempty"`
	// logsURL downloads the host's logs.
	// +optional
	LogsURL string `json:"logsURL,omitempty"`
	// state is the service's host status, e.g. known, installing.
	// +optional
	State string `json:"state,omitempty"`
	// stateInfo explains state.
	// +optional
	StateInfo string `json:"stateInfo,omitempty"`
}

// DeprovisionInfo is the cluster a host is being removed from.
type DeprovisionInfo struct {
	// +optional
	ClusterName string `json:"cluster_name,omitempty"`
	// +optional
	ClusterNamespace string `json:"cluster_namespace,omitempty"`
	// +optional
	NodeName string `json:"node_name,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// CSRType is what a node's CSR is for.
// +kubebuilder:validation:Enum=client;serving
type CSRType string

// CSR types.
const (
	CSRTypeClient  CSRType = "client"
	CSRTypeServing CSRType = "serving"
)

// CSRStatus records the CSRs approved for a host.
type CSRStatus struct {
	// approvedCSRs, in the order approved.
	// +optional
	ApprovedCSRs []CSRInfo `json:"approvedCSRs,omitempty"`
	// lastApprovalAttempt is when approval was last tried.
	// +optional
	LastApprovalAttempt metav1.Time `json:"lastApprovalAttempt,omitempty"`
}

// CSRInfo is one approved CSR.
type CSRInfo struct {
	// name of the CSR.
	Name string `json:"name"`
	// type of the CSR.
	Type CSRType `json:"type"`
	// approvedAt is when it was approved.
	ApprovedAt metav1.Time `json:"approvedAt"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=agents,scope=Namespaced,categories=metalshift
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterDeploymentName.name"
// +kubebuilder:printcolumn:name="Approved",type="boolean",JSONPath=".spec.approved"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".status.role"
// +kubebuilder:printcolumn:name="Stage",type="string",JSONPath=".status.progress.currentStage"
// +kubebuilder:printcolumn:name="Hostname",type="string",JSONPath=".status.inventory.hostname",priority=1
// +kubebuilder:printcolumn:name="Requested Hostname",type="string",JSONPath=".spec.hostname",priority=1

// Agent is one host booted from an InfraEnv's image, named by the host's
// UUID.
type Agent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentSpec   `json:"spec,omitempty"`
	Status AgentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentList is a list of Agents.
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Agent `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Agent{}, &AgentList{})
}
