package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalshift/metalshift/api/assistedcommon"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
)

// AgentClusterInstallSpec is the cluster to install with agents; the
// admission webhooks (assisted/webhooks) default and enforce what is stated
// here, and freeze the spec once the install started.
type AgentClusterInstallSpec struct {
	// imageSetRef is the ClusterImageSet of the release to install;
	// immutable.
	// +optional
	ImageSetRef *hivev1.ClusterImageSetReference `json:"imageSetRef,omitempty"`
	// clusterDeploymentRef is the ClusterDeployment this installs.
	ClusterDeploymentRef corev1.LocalObjectReference `json:"clusterDeploymentRef"`
	// clusterMetadata is set once the cluster is installed; hive copies it to
	// the ClusterDeployment.
	// +optional
	ClusterMetadata *hivev1.ClusterMetadata `json:"clusterMetadata,omitempty"`
	// manifestsConfigMapRef is a ConfigMap of extra install manifests.
	// Deprecated: use manifestsConfigMapRefs.
	// +optional
	ManifestsConfigMapRef *corev1.LocalObjectReference `json:"manifestsConfigMapRef,omitempty"`
	// manifestsConfigMapRefs are ConfigMaps of extra install manifests.
	// +optional
	ManifestsConfigMapRefs []ManifestsConfigMapReference `json:"manifestsConfigMapRefs,omitempty"`
	// networking of the cluster.
	// +optional
	Networking Networking `json:"networking"`
	// sshPublicKey is authorized on the cluster's nodes.
	// +optional
	SSHPublicKey string `json:"sshPublicKey,omitempty"`
	// ntpSources are NTP servers for the cluster's nodes.
	// +optional
	NTPSources []string `json:"ntpSources,omitempty"`
	// provisionRequirements are how many Agents of each role the install
	// waits for.
	ProvisionRequirements ProvisionRequirements `json:"provisionRequirements"`
	// controlPlane configures the control plane machines.
	// +optional
	ControlPlane *AgentMachinePool `json:"controlPlane,omitempty"`
	// arbiter configures the arbiter machines.
	// +optional
	Arbiter *AgentMachinePool `json:"arbiter,omitempty"`
	// compute configures the worker machines.
	// +optional
	Compute []AgentMachinePool `json:"compute,omitempty"`
	// apiVIP is the API's virtual IP. Deprecated: use apiVIPs.
	// +optional
	APIVIP string `json:"apiVIP,omitempty"`
	// apiVIPs are the API's virtual IPs, one per IP family.
	// +optional
	// +kubebuilder:validation:MaxItems=2
	APIVIPs []string `json:"apiVIPs,omitempty"`
	// ingressVIP is the ingress virtual IP. Deprecated: use ingressVIPs.
	// +optional
	IngressVIP string `json:"ingressVIP,omitempty"`
	// ingressVIPs are the ingress virtual IPs, one per IP family.
	// +optional
	// +kubebuilder:validation:MaxItems=2
	IngressVIPs []string `json:"ingressVIPs,omitempty"`
	// holdInstallation keeps the install from starting while true.
	// +optional
	HoldInstallation bool `json:"holdInstallation,omitempty"`
	// ignitionEndpoint overrides where hosts fetch their ignition.
	// +optional
	IgnitionEndpoint *IgnitionEndpoint `json:"ignitionEndpoint,omitempty"`
	// diskEncryption of the nodes' disks.
	// +optional
	DiskEncryption *DiskEncryption `json:"diskEncryption,omitempty"`
	// proxy of the cluster.
	// +optional
	Proxy *Proxy `json:"proxy,omitempty"`
	// platformType is the cluster's platform; empty lets the service choose.
	// +optional
	PlatformType PlatformType `json:"platformType,omitempty"`
	// external configures the External platform.
	// +optional
	External *ExternalPlatformSpec `json:"external,omitempty"`
	// mastersSchedulable lets workloads run on control plane nodes.
	// +optional
	MastersSchedulable bool `json:"mastersSchedulable,omitempty"`
	// mirrorRegistryRef is a ConfigMap of mirror registries.
	// +optional
	MirrorRegistryRef *MirrorRegistryConfigMapReference `json:"mirrorRegistryRef,omitempty"`
	// loadBalancer: who runs the API and ingress load balancer.
	// +optional
	LoadBalancer *LoadBalancer `json:"loadBalancer,omitempty"`
}

// ManifestsConfigMapReference names a ConfigMap of install manifests.
type ManifestsConfigMapReference struct {
	// name of the ConfigMap.
	Name string `json:"name"`
}

// Networking is the cluster's networks.
type Networking struct {
	// machineNetwork are the nodes' networks.
	// +optional
	MachineNetwork []MachineNetworkEntry `json:"machineNetwork,omitempty"`
	// clusterNetwork are the pods' networks.
	// +optional
	ClusterNetwork []ClusterNetworkEntry `json:"clusterNetwork,omitempty"`
	// serviceNetwork are the services' CIDRs.
	// +optional
	ServiceNetwork []string `json:"serviceNetwork,omitempty"`
	// networkType is the cluster network plugin.
	// +optional
	// +kubebuilder:validation:Enum=OpenShiftSDN;OVNKubernetes;CiscoACI;Cilium;Calico;None
	NetworkType string `json:"networkType,omitempty"`
	// userManagedNetworking: the user provides the load balancer and DNS;
	// defaulted on admission (true for a single node or platform None,
	// false for several nodes without a platform); false is refused for a
	// single node.
	// +optional
	UserManagedNetworking *bool `json:"userManagedNetworking,omitempty"`
}

// MachineNetworkEntry is one machine network.
type MachineNetworkEntry struct {
	// cidr of the network.
	CIDR string `json:"cidr"`
}

// ClusterNetworkEntry is one pod network.
type ClusterNetworkEntry struct {
	// cidr of the network.
	CIDR string `json:"cidr"`
	// hostPrefix is the prefix length of each node's share.
	// +optional
	HostPrefix int32 `json:"hostPrefix,omitempty"`
}

// ProvisionRequirements are the numbers of Agents per role.
type ProvisionRequirements struct {
	// controlPlaneAgents: 1 (single node) or more.
	ControlPlaneAgents int `json:"controlPlaneAgents"`
	// workerAgents to wait for.
	// +optional
	WorkerAgents int `json:"workerAgents,omitempty"`
	// arbiterAgents to wait for.
	// +optional
	ArbiterAgents int `json:"arbiterAgents,omitempty"`
}

// Hyperthreading is whether a pool's machines use SMT.
// +kubebuilder:validation:Enum="";Enabled;Disabled
type Hyperthreading string

// Hyperthreading values.
const (
	HyperthreadingEnabled  Hyperthreading = "Enabled"
	HyperthreadingDisabled Hyperthreading = "Disabled"
)

// AgentMachinePool configures one pool of machines.
type AgentMachinePool struct {
	// hyperthreading of the pool's machines.
	// +optional
	// +kubebuilder:default=Enabled
	Hyperthreading Hyperthreading `json:"hyperthreading,omitempty"`
	// name of the pool.
	Name string `json:"name"`
}

// IgnitionEndpoint is where hosts fetch their ignition instead of the
// cluster's machine config server.
type IgnitionEndpoint struct {
	// url of the endpoint.
	// +optional
	URL string `json:"url,omitempty"`
	// caCertificateReference is a Secret with the endpoint's CA.
	// +optional
	CaCertificateReference *CaCertificateReference `json:"caCertificateReference,omitempty"`
}

// CaCertificateReference names a Secret holding a CA certificate.
type CaCertificateReference struct {
	// namespace of the Secret.
	Namespace string `json:"namespace"`
	// name of the Secret.
	Name string `json:"name"`
}

// DiskEncryption configures the nodes' disk encryption.
type DiskEncryption struct {
	// enableOn: none, all, masters, arbiters, workers or a comma list.
	// +optional
	// +kubebuilder:default=none
	EnableOn *string `json:"enableOn,omitempty"`
	// mode of encryption.
	// +optional
	// +kubebuilder:validation:Enum=tpmv2;tang
	Mode *string `json:"mode,omitempty"`
	// tangServers, as JSON, for mode tang.
	// +optional
	TangServers string `json:"tangServers,omitempty"`
}

// Proxy is the cluster-wide proxy.
type Proxy struct {
	// +optional
	HTTPProxy string `json:"httpProxy,omitempty"`
	// +optional
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	// noProxy is a comma list of destinations not proxied.
	// +optional
	NoProxy string `json:"noProxy,omitempty"`
}

// PlatformType is the cluster's platform.
// +kubebuilder:validation:Enum="";BareMetal;None;VSphere;Nutanix;External
type PlatformType string

// Platform types.
const (
	BareMetalPlatformType PlatformType = "BareMetal"
	NonePlatformType      PlatformType = "None"
	VSpherePlatformType   PlatformType = "VSphere"
	NutanixPlatformType   PlatformType = "Nutanix"
	ExternalPlatformType  PlatformType = "External"
)

// ExternalPlatformSpec configures the External platform.
type ExternalPlatformSpec struct {
	// platformName is the name of the external platform.
	// +optional
	PlatformName string `json:"platformName,omitempty"`
	// cloudControllerManager: External when the platform brings one.
	// +optional
	// +kubebuilder:validation:Enum="";External
	CloudControllerManager string `json:"cloudControllerManager,omitempty"`
}

// MirrorRegistryConfigMapReference names a ConfigMap of mirror registries.
type MirrorRegistryConfigMapReference struct {
	// name of the ConfigMap.
	Name string `json:"name"`
	// namespace of the ConfigMap.
	Namespace string `json:"namespace"`
}

// LoadBalancer says who runs the cluster's load balancer.
type LoadBalancer struct {
	// type: ClusterManaged (default) or UserManaged.
	// +optional
	// +kubebuilder:default=ClusterManaged
	// +kubebuilder:validation:Enum=ClusterManaged;UserManaged
	Type string `json:"type,omitempty"`
}

// AgentClusterInstallStatus is the install's progress as the service sees
// it. The AgentClusterInstall reconciler is the one writer of every field
// (docs/agent-install.md, status ownership).
type AgentClusterInstallStatus struct {
	// conditions, hive's shape.
	// +optional
	Conditions []hivev1.ClusterInstallCondition `json:"conditions,omitempty"`
	// progress of the install.
	// +optional
	Progress ClusterProgressInfo `json:"progress,omitempty"`
	// controlPlaneAgentsDiscovered is how many control plane Agents are bound.
	// +optional
	ControlPlaneAgentsDiscovered int `json:"controlPlaneAgentsDiscovered,omitempty"`
	// controlPlaneAgentsReady is how many of them are ready to install.
	// +optional
	ControlPlaneAgentsReady int `json:"controlPlaneAgentsReady,omitempty"`
	// workerAgentsDiscovered is how many worker Agents are bound.
	// +optional
	WorkerAgentsDiscovered int `json:"workerAgentsDiscovered,omitempty"`
	// workerAgentsReady is how many of them are ready to install.
	// +optional
	WorkerAgentsReady int `json:"workerAgentsReady,omitempty"`
	// connectivityMajorityGroups, as JSON: which hosts reach each other.
	// +optional
	ConnectivityMajorityGroups string `json:"connectivityMajorityGroups,omitempty"`
	// machineNetwork as the service computed it.
	// +optional
	MachineNetwork []MachineNetworkEntry `json:"machineNetwork,omitempty"`
	// debugInfo: the service's state and where its events and logs are.
	// +optional
	DebugInfo DebugInfo `json:"debugInfo,omitempty"`
	// apiVIP in use.
	// +optional
	APIVIP string `json:"apiVIP,omitempty"`
	// ingressVIP in use.
	// +optional
	IngressVIP string `json:"ingressVIP,omitempty"`
	// apiVIPs in use.
	// +optional
	APIVIPs []string `json:"apiVIPs,omitempty"`
	// ingressVIPs in use.
	// +optional
	IngressVIPs []string `json:"ingressVIPs,omitempty"`
	// userManagedNetworking in use.
	// +optional
	UserManagedNetworking *bool `json:"userManagedNetworking,omitempty"`
	// platformType in use.
	// +optional
	PlatformType PlatformType `json:"platformType,omitempty"`
	// validationsInfo: the cluster validations' results by category.
	// +optional
	ValidationsInfo assistedcommon.ValidationsStatus `json:"validationsInfo,omitempty"`
}

// ClusterProgressInfo is the install's progress.
type ClusterProgressInfo struct {
	// totalPercentage of the install done.
	// +optional
	TotalPercentage int64 `json:"totalPercentage,omitempty"`
}

// DebugInfo is the service's view of the cluster.
type DebugInfo struct {
	// eventsURL lists the cluster's events.
	// +optional
	EventsURL string `json:"eventsURL,omitempty"`
	// logsURL downloads the cluster's logs.
	// +optional
	LogsURL string `json:"logsURL,omitempty"`
	// state is the service's cluster status, e.g. ready, installing.
	// +optional
	State string `json:"state,omitempty"`
	// stateInfo explains state.
	// +optional
	StateInfo string `json:"stateInfo,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=agentclusterinstalls,scope=Namespaced,shortName=aci,categories=metalshift
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterDeploymentRef.name"
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.debugInfo.state"

// AgentClusterInstall installs the cluster of a ClusterDeployment on the
// Agents bound to it.
type AgentClusterInstall struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentClusterInstallSpec   `json:"spec,omitempty"`
	Status AgentClusterInstallStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentClusterInstallList is a list of AgentClusterInstalls.
type AgentClusterInstallList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentClusterInstall `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &AgentClusterInstall{}, &AgentClusterInstallList{})
}
