package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MetalMachineFinalizer lets the MetalMachine reconciler release its host.
const MetalMachineFinalizer = "metalmachine.infrastructure.cluster.x-k8s.io"

// HostAnnotation on a MetalMachine names the BareMetalHost it claimed, as
// "<namespace>/<name>".
const HostAnnotation = "metal3.io/BareMetalHost"

// MetalMachine conditions and reasons.
const (
	// MetalMachineReadyCondition is True once the claimed host is provisioned.
	MetalMachineReadyCondition = "Ready"
	// HostClaimedCondition is True once a BareMetalHost is claimed.
	HostClaimedCondition = "HostClaimed"

	// WaitingForBootstrapDataReason: the Machine has no bootstrap data yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// NoHostAvailableReason: no available host matches hostSelector.
	NoHostAvailableReason = "NoHostAvailable"
	// HostClaimedReason: a host is claimed.
	HostClaimedReason = "HostClaimed"
	// HostProvisioningReason: the claimed host is being provisioned.
	HostProvisioningReason = "HostProvisioning"
	// HostProvisionedReason: the claimed host runs the image.
	HostProvisionedReason = "HostProvisioned"
	// HostErrorReason: the claimed host reports an error.
	HostErrorReason = "HostError"
)

// Image is the OS image written to the claimed host.
type Image struct {
	// url of the image.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// checksum of the image.
	// +kubebuilder:validation:MinLength=1
	Checksum string `json:"checksum"`
	// checksumType: md5, sha256, sha512 or auto.
	// +kubebuilder:validation:Enum=md5;sha256;sha512;auto
	// +optional
	ChecksumType string `json:"checksumType,omitempty"`
	// format of the image (raw, qcow2, live-iso ...).
	// +optional
	Format string `json:"format,omitempty"`
}

// MetalMachineSpec is the desired state of a machine on bare metal.
type MetalMachineSpec struct {
	// providerID is set by the provider once the host is claimed:
	// metal3://<namespace>/<host>/<metalmachine>.
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// image is written to the claimed host.
	Image Image `json:"image"`

	// hostSelector chooses among available BareMetalHosts in the
	// MetalMachine's namespace; empty matches any.
	// +optional
	HostSelector metav1.LabelSelector `json:"hostSelector,omitempty"`
}

// MetalMachineInitializationStatus holds the fields of the Cluster API contract.
type MetalMachineInitializationStatus struct {
	// provisioned is true once the host runs the image.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// HostReference names a BareMetalHost.
type HostReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// MetalMachineStatus is the observed state of a MetalMachine.
type MetalMachineStatus struct {
	// initialization holds the fields of the Cluster API contract.
	// +optional
	Initialization MetalMachineInitializationStatus `json:"initialization,omitempty,omitzero"`
	// host is the claimed BareMetalHost.
	// +optional
	Host *HostReference `json:"host,omitempty"`
	// addresses of the host, from its NICs.
	// +optional
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`
	// conditions of the MetalMachine.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=metalmachines,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Host",type="string",JSONPath=".status.host.name",description="Claimed BareMetalHost"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",priority=1
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MetalMachine is a Cluster API infrastructure machine backed by a BareMetalHost.
type MetalMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MetalMachineSpec   `json:"spec,omitempty"`
	Status MetalMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (m *MetalMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions.
func (m *MetalMachine) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// SetObservedGeneration sets status.observedGeneration.
func (m *MetalMachine) SetObservedGeneration(g int64) { m.Status.ObservedGeneration = g }

// +kubebuilder:object:root=true

// MetalMachineList is a list of MetalMachines.
type MetalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MetalMachine `json:"items"`
}

// MetalMachineTemplateResource is the template of a MetalMachine.
type MetalMachineTemplateResource struct {
	// metadata of machines created from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of machines created from the template.
	Spec MetalMachineSpec `json:"spec"`
}

// MetalMachineTemplateSpec is the spec of a MetalMachineTemplate.
type MetalMachineTemplateSpec struct {
	Template MetalMachineTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=metalmachinetemplates,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"

// MetalMachineTemplate is cloned into a MetalMachine per Machine.
type MetalMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MetalMachineTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// MetalMachineTemplateList is a list of MetalMachineTemplates.
type MetalMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MetalMachineTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MetalMachine{}, &MetalMachineList{}, &MetalMachineTemplate{}, &MetalMachineTemplateList{})
}
