package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InfraEnvNameLabel is the label, valued with the InfraEnv's name, on the
// Agents of hosts booted from its image (status.agentLabelSelector).
const InfraEnvNameLabel = "infraenvs.agent-install.openshift.io"

// EnableIronicAgentAnnotation "true" on an InfraEnv makes its image one
// for the converged flow: booted by the host engine from a host's
// PreprovisioningImage, its agent finds its host at the engine by MAC
// address and installs when the host's custom deploy start_assisted_install
// runs. Such an image does nothing when booted by hand.
const EnableIronicAgentAnnotation = "infraenv.agent-install.openshift.io/enable-ironic-agent"

// ConvergedImage tells whether ie's image is a converged-flow image.
func ConvergedImage(ie *InfraEnv) bool {
	return ie.Annotations[EnableIronicAgentAnnotation] == "true"
}

// IPXEScriptType chooses the iPXE script the InfraEnv serves.
// +kubebuilder:validation:Enum="";DiscoveryImageAlways;BootOrderControl
type IPXEScriptType string

// iPXE script types.
const (
	// DiscoveryImageAlways boots the discovery image every time.
	DiscoveryImageAlways IPXEScriptType = "DiscoveryImageAlways"
	// BootOrderControl boots the discovery image only until the host is
	// installed, then its disk.
	BootOrderControl IPXEScriptType = "BootOrderControl"
)

// ImageType is the kind of discovery ISO.
// +kubebuilder:validation:Enum=full-iso;minimal-iso;disconnected-iso
type ImageType string

// Image types.
const (
	ImageTypeFull         ImageType = "full-iso"
	ImageTypeMinimal      ImageType = "minimal-iso"
	ImageTypeDisconnected ImageType = "disconnected-iso"
)

// InfraEnvSpec is a discovery image and how hosts booted from it join; the
// admission webhooks (assisted/webhooks) enforce the rules stated here.
type InfraEnvSpec struct {
	// proxy the discovered hosts use.
	// +optional
	Proxy *Proxy `json:"proxy,omitempty"`
	// additionalNTPSources are added to the hosts' NTP servers; exclusive
	// with ntpSources.
	// +optional
	AdditionalNTPSources []string `json:"additionalNTPSources,omitempty"`
	// ntpSources replace the hosts' NTP servers; exclusive with
	// additionalNTPSources.
	// +optional
	NTPSources []string `json:"ntpSources,omitempty"`
	// sshAuthorizedKey lets its holder log in to the discovered hosts.
	// +optional
	SSHAuthorizedKey string `json:"sshAuthorizedKey,omitempty"`
	// pullSecretRef is a Secret with key .dockerconfigjson.
	PullSecretRef *corev1.LocalObjectReference `json:"pullSecretRef"`
	// agentLabels are set on the Agents of this image's hosts.
	// +optional
	AgentLabels map[string]string `json:"agentLabels,omitempty"`
	// nmStateConfigLabelSelector selects the NMStateConfigs embedded in the
	// image.
	// +optional
	NMStateConfigLabelSelector metav1.LabelSelector `json:"nmStateConfigLabelSelector,omitempty"`
	// clusterRef binds the hosts to a ClusterDeployment; without it they are
	// bound later (late binding). Immutable.
	// +optional
	ClusterRef *ClusterReference `json:"clusterRef,omitempty"`
	// ignitionConfigOverride, as JSON, is merged into the discovery ignition.
	// +optional
	IgnitionConfigOverride string `json:"ignitionConfigOverride,omitempty"`
	// cpuArchitecture of the image; immutable.
	// +optional
	// +kubebuilder:default=x86_64
	// +kubebuilder:validation:Enum=x86_64;aarch64;arm64;ppc64le;s390x
	CpuArchitecture string `json:"cpuArchitecture,omitempty"` //nolint:revive // wire name
	// ipxeScriptType chooses the iPXE script.
	// +optional
	// +kubebuilder:default=DiscoveryImageAlways
	IPXEScriptType IPXEScriptType `json:"ipxeScriptType,omitempty"`
	// kernelArguments change the discovery kernel's command line.
	// +optional
	KernelArguments []KernelArgument `json:"kernelArguments,omitempty"`
	// additionalTrustBundle is PEM CA certificates the hosts trust.
	// +optional
	AdditionalTrustBundle string `json:"additionalTrustBundle,omitempty"`
	// osImageVersion picks the discovery OS; not with clusterRef, but
	// added to one once its cluster is installed (for day-2 hosts).
	// +optional
	OSImageVersion string `json:"osImageVersion,omitempty"`
	// mirrorRegistryRef is a ConfigMap of mirror registries.
	// +optional
	MirrorRegistryRef *MirrorRegistryConfigMapReference `json:"mirrorRegistryRef,omitempty"`
	// imageType is the kind of ISO.
	// +optional
	ImageType ImageType `json:"imageType,omitempty"`
	// agentApproval approves the Agents of this image's hosts.
	// +optional
	AgentApproval *AgentApproval `json:"agentApproval,omitempty"`
	// networkDiscoveryDelaySeconds delays the hosts' network discovery.
	// +optional
	NetworkDiscoveryDelaySeconds *int32 `json:"networkDiscoveryDelaySeconds,omitempty"`
}

// Proxy is the proxy of the discovered hosts.
type Proxy struct {
	// +optional
	HTTPProxy string `json:"httpProxy,omitempty"`
	// +optional
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	// noProxy is a comma list of destinations not proxied.
	// +optional
	NoProxy string `json:"noProxy,omitempty"`
}

// KernelArgument is one change to a kernel command line.
type KernelArgument struct {
	// operation on the argument.
	// +optional
	// +kubebuilder:validation:Enum=append;replace;delete
	Operation string `json:"operation,omitempty"`
	// value, e.g. console=ttyS0.
	// +optional
	Value string `json:"value,omitempty"`
}

// MirrorRegistryConfigMapReference names a ConfigMap of mirror registries.
type MirrorRegistryConfigMapReference struct {
	// name of the ConfigMap.
	Name string `json:"name"`
	// namespace of the ConfigMap.
	Namespace string `json:"namespace"`
}

// AgentApproval says which Agents are approved without a person.
type AgentApproval struct {
	// autoApprove approves every Agent of the InfraEnv.
	// +optional
	AutoApprove bool `json:"autoApprove,omitempty"`
}

// InfraEnvStatus is the image built and where to get it.
type InfraEnvStatus struct {
	// isoDownloadURL downloads the discovery ISO.
	// +optional
	ISODownloadURL string `json:"isoDownloadURL,omitempty"`
	// createdTime is when the ISO was (re)generated.
	// +optional
	CreatedTime *metav1.Time `json:"createdTime,omitempty"`
	// conditions, custom-resource-status shape.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// agentLabelSelector selects the Agents of this image's hosts.
	// +optional
	AgentLabelSelector metav1.LabelSelector `json:"agentLabelSelector,omitempty"`
	// debugInfo: where the InfraEnv's events and static network are.
	// +optional
	InfraEnvDebugInfo InfraEnvDebugInfo `json:"debugInfo,omitempty"`
	// bootArtifacts are the URLs to boot without the ISO.
	// +optional
	BootArtifacts BootArtifacts `json:"bootArtifacts,omitempty"`
}

// InfraEnvDebugInfo locates an InfraEnv's events and static network.
type InfraEnvDebugInfo struct {
	// eventsURL lists the InfraEnv's events.
	// +optional
	EventsURL string `json:"eventsURL,omitempty"`
	// staticNetworkDownloadURL downloads the embedded static network.
	// +optional
	StaticNetworkDownloadURL string `json:"staticNetworkDownloadURL,omitempty"`
}

// BootArtifacts are the URLs of the discovery image's parts.
type BootArtifacts struct {
	// +optional
	InitrdURL string `json:"initrd,omitempty"`
	// +optional
	RootfsURL string `json:"rootfs,omitempty"`
	// +optional
	KernelURL string `json:"kernel,omitempty"`
	// +optional
	IpxeScriptURL string `json:"ipxeScript,omitempty"`
	// +optional
	DiscoveryIgnitionURL string `json:"discoveryIgnitionURL,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=infraenvs,scope=Namespaced,categories=metalshift
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="ISO Created At",type="string",JSONPath=".status.createdTime"
// +kubebuilder:printcolumn:name="ISO URL",type="string",JSONPath=".status.isoDownloadURL",priority=1

// InfraEnv is a discovery image: hosts booted from it become Agents.
type InfraEnv struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InfraEnvSpec   `json:"spec,omitempty"`
	Status InfraEnvStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// InfraEnvList is a list of InfraEnvs.
type InfraEnvList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfraEnv `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &InfraEnv{}, &InfraEnvList{})
}
