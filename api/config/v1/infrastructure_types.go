package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InfrastructureName is the name of the cluster's only Infrastructure.
const InfrastructureName = "cluster"

// PlatformType names the infrastructure a cluster runs on.
type PlatformType string

// Platform types (upstream's names).
const (
	AWSPlatformType          PlatformType = "AWS"
	AzurePlatformType        PlatformType = "Azure"
	BareMetalPlatformType    PlatformType = "BareMetal"
	GCPPlatformType          PlatformType = "GCP"
	LibvirtPlatformType      PlatformType = "Libvirt"
	OpenStackPlatformType    PlatformType = "OpenStack"
	NonePlatformType         PlatformType = "None"
	VSpherePlatformType      PlatformType = "VSphere"
	OvirtPlatformType        PlatformType = "oVirt"
	IBMCloudPlatformType     PlatformType = "IBMCloud"
	KubevirtPlatformType     PlatformType = "KubeVirt"
	EquinixMetalPlatformType PlatformType = "EquinixMetal"
	PowerVSPlatformType      PlatformType = "PowerVS"
	AlibabaCloudPlatformType PlatformType = "AlibabaCloud"
	NutanixPlatformType      PlatformType = "Nutanix"
	ExternalPlatformType     PlatformType = "External"
)

// ConfigMapFileReference names a key of a ConfigMap.
type ConfigMapFileReference struct {
	Name string `json:"name"`
	// +optional
	Key string `json:"key,omitempty"`
}

// PlatformSpec is the platform configuration a user asks for.
type PlatformSpec struct {
	// type of the platform.
	// +optional
	Type PlatformType `json:"type,omitempty"`
}

// InfrastructureSpec is the infrastructure configuration a user asks for.
type InfrastructureSpec struct {
	// cloudConfig is the cloud provider configuration.
	// +optional
	CloudConfig ConfigMapFileReference `json:"cloudConfig,omitempty"`
	// platformSpec is the platform configuration.
	// +optional
	PlatformSpec PlatformSpec `json:"platformSpec,omitempty"`
}

// BareMetalPlatformStatus is what the bare-metal platform reports.
type BareMetalPlatformStatus struct {
	// apiServerInternalIP is the API VIP (deprecated: apiServerInternalIPs).
	// +optional
	APIServerInternalIP string `json:"apiServerInternalIP,omitempty"`
	// apiServerInternalIPs are the API VIPs.
	// +optional
	APIServerInternalIPs []string `json:"apiServerInternalIPs,omitempty"`
	// ingressIP is the ingress VIP (deprecated: ingressIPs).
	// +optional
	IngressIP string `json:"ingressIP,omitempty"`
	// ingressIPs are the ingress VIPs.
	// +optional
	IngressIPs []string `json:"ingressIPs,omitempty"`
	// nodeDNSIP is the address of the nodes' internal DNS.
	// +optional
	NodeDNSIP string `json:"nodeDNSIP,omitempty"`
	// machineNetworks are the CIDRs of the nodes' networks.
	// +optional
	MachineNetworks []string `json:"machineNetworks,omitempty"`
}

// PlatformStatus is what the cluster's platform reports.
type PlatformStatus struct {
	// type of the platform the cluster runs on.
	// +optional
	Type PlatformType `json:"type,omitempty"`
	// baremetal holds the bare-metal platform's status.
	// +optional
	BareMetal *BareMetalPlatformStatus `json:"baremetal,omitempty"`
	// equinixMetal holds the Equinix Metal platform's status.
	// +optional
	EquinixMetal *EquinixMetalPlatformStatus `json:"equinixMetal,omitempty"`
}

// EquinixMetalPlatformStatus is the Equinix Metal platform's status: the
// elastic IPs of the API and the ingress.
type EquinixMetalPlatformStatus struct {
	// apiServerInternalIP is the address the API answers at inside the
	// cluster (api-int).
	// +optional
	APIServerInternalIP string `json:"apiServerInternalIP,omitempty"`
	// ingressIP is the address of the default ingress.
	// +optional
	IngressIP string `json:"ingressIP,omitempty"`
}

// InfrastructureStatus describes the infrastructure the cluster runs on.
type InfrastructureStatus struct {
	// infrastructureName uniquely names the cluster's infrastructure.
	// +optional
	InfrastructureName string `json:"infrastructureName,omitempty"`
	// platform is deprecated: platformStatus.type.
	// +optional
	Platform PlatformType `json:"platform,omitempty"`
	// platformStatus is the platform's status.
	// +optional
	PlatformStatus *PlatformStatus `json:"platformStatus,omitempty"`
	// etcdDiscoveryDomain is deprecated.
	// +optional
	EtcdDiscoveryDomain string `json:"etcdDiscoveryDomain,omitempty"`
	// apiServerURL is the external URL of the API server.
	// +optional
	APIServerURL string `json:"apiServerURL,omitempty"`
	// apiServerInternalURI is the internal URL of the API server.
	// +optional
	APIServerInternalURL string `json:"apiServerInternalURI,omitempty"`
	// controlPlaneTopology is HighlyAvailable, SingleReplica, External or
	// DualReplica.
	// +optional
	ControlPlaneTopology string `json:"controlPlaneTopology,omitempty"`
	// infrastructureTopology is HighlyAvailable or SingleReplica.
	// +optional
	InfrastructureTopology string `json:"infrastructureTopology,omitempty"`
	// cpuPartitioning is None or AllNodes.
	// +optional
	CPUPartitioning string `json:"cpuPartitioning,omitempty"`
}

// Type returns the platform the cluster runs on: platformStatus.type, else
// the deprecated platform.
func (s *InfrastructureStatus) Type() PlatformType {
	if s.PlatformStatus != nil && s.PlatformStatus.Type != "" {
		return s.PlatformStatus.Type
	}
	return s.Platform
}

// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=infrastructures,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Platform",type="string",JSONPath=".status.platformStatus.type"
// +kubebuilder:printcolumn:name="Name",type="string",JSONPath=".status.infrastructureName"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// Infrastructure (named "cluster") describes the infrastructure an installed
// cluster runs on.
type Infrastructure struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec InfrastructureSpec `json:"spec"`
	// +optional
	Status InfrastructureStatus `json:"status"`
}

// +kubebuilder:object:root=true

// InfrastructureList is a list of Infrastructures.
type InfrastructureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Infrastructure `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Infrastructure{}, &InfrastructureList{})
}
