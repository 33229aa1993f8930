package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// EquinixMetalMachineFinalizer lets the EquinixMetalMachine reconciler
// delete its device before the object goes away.
const EquinixMetalMachineFinalizer = "equinixmetalmachine.infrastructure.cluster.x-k8s.io"

// EquinixMetalProviderIDPrefix starts the providerID of an
// EquinixMetalMachine, followed by the device's ID.
const EquinixMetalProviderIDPrefix = "equinixmetal://"

// NextAvailableHardwareReservation as spec.hardwareReservationID lets the
// API pick any free hardware reservation of the project for the plan.
const NextAvailableHardwareReservation = "next-available"

// CustomIPXE is the operating system that boots a device from an iPXE
// script: metalshift's live image.
const CustomIPXE = "custom_ipxe"

// EquinixMetalMachine conditions and reasons.
const (
	// EquinixMetalMachineReadyCondition is True once the machine's device is
	// active.
	EquinixMetalMachineReadyCondition = "Ready"

	// DeviceReadyCondition tells where the machine's device is in its life:
	// True once it is active.
	DeviceReadyCondition = "DeviceReady"
	// WaitingForClusterInfrastructureReason: the cluster's infrastructure
	// (its EquinixMetalCluster) is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// (WaitingForBootstrapDataReason, shared with MetalMachine, says the
	// Machine has no bootstrap data yet.)

	// DeviceQueuedReason: the device is created and waits for hardware.
	DeviceQueuedReason = "DeviceQueued"
	// DeviceProvisioningReason: the device is being provisioned (or
	// reinstalled).
	DeviceProvisioningReason = "DeviceProvisioning"
	// DeviceActiveReason: the device is active.
	DeviceActiveReason = "DeviceActive"
	// DeviceInactiveReason: the device is powered off.
	DeviceInactiveReason = "DeviceInactive"
	// DeviceFailedReason: the device failed to provision; the machine does
	// not recover and is to be replaced.
	DeviceFailedReason = "DeviceFailed"
	// DeviceNotFoundReason: the device the machine had is gone.
	DeviceNotFoundReason = "DeviceNotFound"
	// DeviceCreateFailedReason: the API refused to create the device (the
	// message says why: plan, metro, quota).
	DeviceCreateFailedReason = "DeviceCreateFailed"
	// NoHardwareReservationAvailableReason: none of the hardware
	// reservations spec.hardwareReservationID names is free.
	NoHardwareReservationAvailableReason = "NoHardwareReservationAvailable"
	// DeviceDeletingReason: the device is being deprovisioned.
	DeviceDeletingReason = "DeviceDeleting"
	// DeviceReinstallingReason: the device was active for the cluster's
	// deviceBootTimeout without its Node registering, and is reinstalled.
	DeviceReinstallingReason = "DeviceReinstalling"
)

// EquinixMetalMachineSpec is the desired state of a machine on Equinix Metal.
// +kubebuilder:validation:XValidation:rule="!(has(self.metro) && has(self.facility))",message="metro and facility are exclusive"
// +kubebuilder:validation:XValidation:rule="!has(self.ipxeScriptURL) || self.operatingSystem == 'custom_ipxe'",message="ipxeScriptURL needs operatingSystem custom_ipxe"
type EquinixMetalMachineSpec struct {
	// providerID is set by the provider once the device is created:
	// equinixmetal://<device ID>.
	// +optional
	// +kubebuilder:validation:Pattern=`^equinixmetal://[0-9a-fA-F-]+$`
	// +kubebuilder:validation:MaxLength=128
	ProviderID string `json:"providerID,omitempty"`

	// plan is the device's plan (machine type), e.g. c3.small.x86.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Plan string `json:"plan"`

	// metro places the device in another metro than the cluster's; metro
	// and facility are exclusive.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	// +kubebuilder:validation:MaxLength=16
	Metro string `json:"metro,omitempty"`

	// facility places the device in a facility rather than the cluster's
	// metro or facility.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	// +kubebuilder:validation:MaxLength=16
	Facility string `json:"facility,omitempty"`

	// operatingSystem is the device's operating system slug. custom_ipxe
	// boots metalshift's live image, which writes the cluster's OS; other
	// slugs are for machines outside an OpenShift install.
	// +optional
	// +kubebuilder:default=custom_ipxe
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	OperatingSystem string `json:"operatingSystem,omitempty"`

	// ipxeScriptURL overrides the iPXE script the device boots (with
	// custom_ipxe); empty means the one metalshift serves for the machine.
	// The webhook checks it, as the cluster's apiURL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	IPXEScriptURL string `json:"ipxeScriptURL,omitempty"`

	// image is the OS image metalshift's live image writes to the device's
	// disk before it boots it with the machine's Ignition: required when
	// the device boots metalshift's iPXE script (custom_ipxe without an
	// ipxeScriptURL).
	// +optional
	Image *Image `json:"image,omitempty"`
	// billingCycle of the device.
	// +optional
	// +kubebuilder:default=hourly
	// +kubebuilder:validation:Enum=hourly;daily;monthly;yearly
	BillingCycle string `json:"billingCycle,omitempty"`

	// hardwareReservationID puts the device on reserved hardware: one
	// reservation's ID, a comma-separated list of IDs tried in order, or
	// next-available for any free reservation of the project.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	HardwareReservationID string `json:"hardwareReservationID,omitempty"`

	// tags are added to the device, after those the provider sets to find
	// it again.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Tags []string `json:"tags,omitempty"`

	// sshKeys are OpenSSH public keys that may log in to the device, on top
	// of the cluster's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=16384
	SSHKeys []string `json:"sshKeys,omitempty"`
}

// EquinixMetalMachineInitializationStatus holds the fields of the Cluster
// API infrastructure machine contract.
type EquinixMetalMachineInitializationStatus struct {
	// provisioned is true once the device is active.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// EquinixMetalMachineStatus is the observed state of an EquinixMetalMachine.
// A device that fails is reported by the Ready and DeviceReady conditions
// with reason DeviceFailed, as Cluster API v1beta2 reports failures, not by
// failureReason and failureMessage fields.
type EquinixMetalMachineStatus struct {
	// initialization holds the fields of the Cluster API contract.
	// +optional
	Initialization EquinixMetalMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// deviceID is the ID of the machine's device.
	// +optional
	DeviceID string `json:"deviceID,omitempty"`

	// instanceState is the device's state as the API last reported it:
	// queued, provisioning, active, inactive, reinstalling, failed,
	// deprovisioning ...
	// +optional
	InstanceState string `json:"instanceState,omitempty"`

	// failedDevices counts the machine's devices that failed to provision
	// and were deleted and replaced; the machine stops replacing them at
	// three.
	// +optional
	FailedDevices int32 `json:"failedDevices,omitempty"`
	// addresses of the device: public ones as ExternalIP, private ones as
	// InternalIP, and its hostname.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// conditions of the EquinixMetalMachine.
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
// +kubebuilder:resource:path=equinixmetalmachines,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.instanceState",description="Device state"
// +kubebuilder:printcolumn:name="Device",type="string",JSONPath=".status.deviceID",description="Device ID"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",priority=1
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".spec.plan"
// +kubebuilder:printcolumn:name="Metro",type="string",JSONPath=".spec.metro",description="Metro, when it overrides the cluster's"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// EquinixMetalMachine is a Cluster API infrastructure machine backed by an
// Equinix Metal device.
type EquinixMetalMachine struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec is the desired state.
	Spec EquinixMetalMachineSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status EquinixMetalMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (m *EquinixMetalMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions.
func (m *EquinixMetalMachine) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// SetObservedGeneration sets status.observedGeneration.
func (m *EquinixMetalMachine) SetObservedGeneration(g int64) { m.Status.ObservedGeneration = g }

// +kubebuilder:object:root=true

// EquinixMetalMachineList is a list of EquinixMetalMachines.
type EquinixMetalMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EquinixMetalMachine `json:"items"`
}

// EquinixMetalMachineTemplateResource is the template of an
// EquinixMetalMachine.
type EquinixMetalMachineTemplateResource struct {
	// metadata of machines created from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of machines created from the template.
	Spec EquinixMetalMachineSpec `json:"spec"`
}

// EquinixMetalMachineTemplateSpec is the spec of an
// EquinixMetalMachineTemplate.
type EquinixMetalMachineTemplateSpec struct {
	// template is cloned into an EquinixMetalMachine per Machine.
	Template EquinixMetalMachineTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=equinixmetalmachinetemplates,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Plan",type="string",JSONPath=".spec.template.spec.plan"
// +kubebuilder:printcolumn:name="Metro",type="string",JSONPath=".spec.template.spec.metro"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// EquinixMetalMachineTemplate is cloned into an EquinixMetalMachine per
// Machine (by a MachineDeployment or the control plane).
type EquinixMetalMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec is the template.
	Spec EquinixMetalMachineTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// EquinixMetalMachineTemplateList is a list of EquinixMetalMachineTemplates.
type EquinixMetalMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EquinixMetalMachineTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &EquinixMetalMachine{}, &EquinixMetalMachineList{},
		&EquinixMetalMachineTemplate{}, &EquinixMetalMachineTemplateList{})
}
