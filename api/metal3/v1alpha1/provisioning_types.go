package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Provisioning singleton, as the cluster-baremetal-operator names it.
const (
	// ProvisioningSingletonName is the only name a Provisioning may have;
	// the operator ignores any other.
	ProvisioningSingletonName = "provisioning-configuration"
	// ProvisioningFinalizer holds a Provisioning until the operator has
	// removed what it deployed for it.
	ProvisioningFinalizer = "provisioning.metal3.io"
	// ProvisioningPausedAnnotation (any value) stops the operator from
	// acting on the Provisioning until it is removed.
	ProvisioningPausedAnnotation = "provisioning.metal3.io/paused"
)

// ProvisioningNetwork is how the operator treats the provisioning network.
// +kubebuilder:validation:Enum=Managed;Unmanaged;Disabled
type ProvisioningNetwork string

// Provisioning network modes.
const (
	// ProvisioningNetworkManaged: the provisioning network is the
	// operator's, DHCP on it included.
	ProvisioningNetworkManaged ProvisioningNetwork = "Managed"
	// ProvisioningNetworkUnmanaged: a provisioning network exists, DHCP on
	// it is someone else's.
	ProvisioningNetworkUnmanaged ProvisioningNetwork = "Unmanaged"
	// ProvisioningNetworkDisabled: there is no provisioning network; hosts
	// boot from virtual media over the external network.
	ProvisioningNetworkDisabled ProvisioningNetwork = "Disabled"
)

// BootIsoSource is where the deploy ISO of a host is served from.
// +kubebuilder:validation:Enum=local;http
type BootIsoSource string

// Boot ISO sources.
const (
	BootIsoSourceLocal BootIsoSource = "local"
	BootIsoSourceHTTP  BootIsoSource = "http"
)

// PreProvisioningOSDownloadURLs are the URLs of the images hosts boot before
// they are provisioned.
type PreProvisioningOSDownloadURLs struct {
	// isoURL is the URL of a live ISO.
	// +optional
	IsoURL string `json:"isoURL,omitempty"`
	// kernelURL is the URL of a live kernel.
	// +optional
	KernelURL string `json:"kernelURL,omitempty"`
	// initramfsURL is the URL of a live initramfs.
	// +optional
	InitramfsURL string `json:"initramfsURL,omitempty"`
	// rootfsURL is the URL of a live root filesystem.
	// +optional
	RootfsURL string `json:"rootfsURL,omitempty"`
}

// UnsupportedConfigOverrides are overrides the operator does not support.
type UnsupportedConfigOverrides struct {
	// ironicAgentImage replaces the deploy agent's image.
	// +optional
	IronicAgentImage string `json:"ironicAgentImage,omitempty"`
}

// PrometheusExporter configures the hardware sensor metrics exporter.
type PrometheusExporter struct {
	// enabled turns the exporter on.
	Enabled bool `json:"enabled"`
	// sensorCollectionInterval is how often sensors are read, in seconds.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=60
	// +optional
	SensorCollectionInterval int `json:"sensorCollectionInterval,omitempty"`
	// disableDefaultPrometheusRules leaves out the default alerting rules.
	// +optional
	DisableDefaultPrometheusRules bool `json:"disableDefaultPrometheusRules,omitempty"`
}

// ProvisioningSpec configures the bare-metal provisioning stack of a cluster.
type ProvisioningSpec struct {
	// provisioningInterface is the name of the NIC on the provisioning
	// network of the control-plane hosts.
	// +optional
	ProvisioningInterface string `json:"provisioningInterface,omitempty"`
	// provisioningMacAddresses are the MACs of the control-plane hosts'
	// NICs on the provisioning network.
	// +optional
	ProvisioningMacAddresses []string `json:"provisioningMacAddresses,omitempty"`
	// provisioningIP is the address the provisioning services use on the
	// provisioning network.
	// +optional
	ProvisioningIP string `json:"provisioningIP,omitempty"`
	// provisioningNetworkCIDR is the provisioning network's CIDR.
	// +optional
	ProvisioningNetworkCIDR string `json:"provisioningNetworkCIDR,omitempty"`
	// provisioningDHCPExternal is deprecated: with provisioningNetwork
	// unset, true means Unmanaged.
	// +optional
	ProvisioningDHCPExternal bool `json:"provisioningDHCPExternal,omitempty"`
	// provisioningDHCPRange is the DHCP range on the provisioning network,
	// "start,end"; required in Managed mode.
	// +optional
	ProvisioningDHCPRange string `json:"provisioningDHCPRange,omitempty"`
	// provisioningNetworkGateway is the gateway DHCP hands out on the
	// provisioning network (Managed mode only).
	// +optional
	ProvisioningNetworkGateway string `json:"provisioningNetworkGateway,omitempty"`
	// provisioningOSDownloadURL is the URL of the OS image to cache, with
	// a sha256 query parameter; it ends in .qcow2.gz or .qcow2.xz.
	// +optional
	ProvisioningOSDownloadURL string `json:"provisioningOSDownloadURL,omitempty"`
	// provisioningNetwork is Managed (the default), Unmanaged or Disabled.
	// +optional
	ProvisioningNetwork ProvisioningNetwork `json:"provisioningNetwork,omitempty"`
	// provisioningDNS hands out the cluster's DNS on the provisioning network.
	// +optional
	ProvisioningDNS bool `json:"provisioningDNS,omitempty"`
	// watchAllNamespaces makes the host engine act on BareMetalHosts of
	// every namespace, not only openshift-machine-api.
	// +optional
	WatchAllNamespaces bool `json:"watchAllNamespaces,omitempty"`
	// additionalNTPServers are NTP servers for the hosts being provisioned.
	// +optional
	AdditionalNTPServers []string `json:"additionalNTPServers,omitempty"`
	// bootIsoSource is where the deploy ISO is served from: local or http.
	// +optional
	BootIsoSource BootIsoSource `json:"bootIsoSource,omitempty"`
	// virtualMediaViaExternalNetwork serves virtual media over the
	// external network even with a provisioning network.
	// +optional
	VirtualMediaViaExternalNetwork bool `json:"virtualMediaViaExternalNetwork,omitempty"`
	// preProvisioningOSDownloadURLs are the images hosts boot before they
	// are provisioned.
	// +optional
	PreProvisioningOSDownloadURLs PreProvisioningOSDownloadURLs `json:"preProvisioningOSDownloadURLs,omitempty"`
	// disableVirtualMediaTLS serves virtual media over plain HTTP only.
	// +optional
	DisableVirtualMediaTLS bool `json:"disableVirtualMediaTLS,omitempty"`
	// unsupportedConfigOverrides are overrides the operator does not support.
	// +optional
	UnsupportedConfigOverrides *UnsupportedConfigOverrides `json:"unsupportedConfigOverrides,omitempty"`
	// prometheusExporter configures the hardware sensor metrics exporter.
	// +optional
	PrometheusExporter *PrometheusExporter `json:"prometheusExporter,omitempty"`
	// externalIPs are external addresses of the provisioning services.
	// +optional
	ExternalIPs []string `json:"externalIPs,omitempty"`
}

// NetworkMode is the provisioning network mode the spec asks for: its
// provisioningNetwork, else Unmanaged with the deprecated
// provisioningDHCPExternal, else Managed.
func (s *ProvisioningSpec) NetworkMode() ProvisioningNetwork {
	switch {
	case s.ProvisioningNetwork != "":
		return s.ProvisioningNetwork
	case s.ProvisioningDHCPExternal:
		return ProvisioningNetworkUnmanaged
	default:
		return ProvisioningNetworkManaged
	}
}

// OperatorCondition is a condition of an operator's status
// (operator.openshift.io/v1).
type OperatorCondition struct {
	Type   string                 `json:"type"`
	Status metav1.ConditionStatus `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// GenerationStatus is the generation of a resource the operator manages,
// as it last applied it.
type GenerationStatus struct {
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// lastGeneration is the resource's generation after the operator's
	// last write.
	LastGeneration int64 `json:"lastGeneration"`
	// hash of the last applied content, when the resource has no generation.
	// +optional
	Hash string `json:"hash,omitempty"`
}

// ProvisioningStatus is operator.openshift.io/v1's OperatorStatus, inlined as
// upstream does; the operator writes observedGeneration and generations.
type ProvisioningStatus struct {
	// observedGeneration is the last generation of the spec the operator acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []OperatorCondition `json:"conditions,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// +optional
	LatestAvailableRevision int32 `json:"latestAvailableRevision,omitempty"`
	// generations of the resources the operator applied.
	// +optional
	Generations []GenerationStatus `json:"generations,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=provisionings,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Network",type="string",JSONPath=".spec.provisioningNetwork"
// +kubebuilder:printcolumn:name="IP",type="string",JSONPath=".spec.provisioningIP"
// +kubebuilder:printcolumn:name="Interface",type="string",JSONPath=".spec.provisioningInterface"
// +kubebuilder:printcolumn:name="Observed",type="integer",JSONPath=".status.observedGeneration",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// Provisioning configures the bare-metal provisioning stack of a cluster:
// one cluster-scoped object named provisioning-configuration, read by the
// bare-metal operator, which deploys and reports that stack.
type Provisioning struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ProvisioningSpec `json:"spec,omitempty"`
	// +optional
	Status ProvisioningStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProvisioningList is a list of Provisionings.
type ProvisioningList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Provisioning `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Provisioning{}, &ProvisioningList{})
}
