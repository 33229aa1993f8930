package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
)

// OpenShiftControlPlaneFinalizer lets the reconciler tear down in order.
const OpenShiftControlPlaneFinalizer = "openshiftcontrolplane.controlplane.cluster.x-k8s.io"

// Labels and annotations.
const (
	// BootstrapMachineLabel marks the bootstrap Machine of a control plane.
	BootstrapMachineLabel = "controlplane.cluster.x-k8s.io/openshift-bootstrap"
	// ManifestAnnotation on a Secret wrapping user manifests says which
	// installer directory they come from; see the bootstrap provider's API.
	ManifestAnnotation = bootstrapv1.ManifestAnnotation
	// ManifestTypeManifest and ManifestTypeOpenShift are its values.
	ManifestTypeManifest  = bootstrapv1.ManifestTypeManifest
	ManifestTypeOpenShift = bootstrapv1.ManifestTypeOpenShift
)

// Keys of the Secrets an OpenShiftControlPlane reads: the same the
// bootstrap provider reads from the Secrets the control plane names.
const (
	// InstallConfigKey holds install-config.yaml in the install-config Secret.
	InstallConfigKey = bootstrapv1.InstallConfigKey
	// Keys of the install-state Secret: the cluster's root CA and the
	// admin kubeconfig (server = the API endpoint).
	InstallStateCACertKey     = bootstrapv1.InstallStateCACertKey
	InstallStateCAKeyKey      = bootstrapv1.InstallStateCAKeyKey
	InstallStateKubeconfigKey = bootstrapv1.InstallStateKubeconfigKey
)

// Condition types and reasons.
const (
	// BootstrapReadyCondition is True while the bootstrap node serves the API.
	BootstrapReadyCondition = "BootstrapReady"
	// ControlPlaneInitializedCondition is True once the control plane took over from the bootstrap node.
	ControlPlaneInitializedCondition = "ControlPlaneInitialized"
	// BootstrapRemovedCondition is True once the bootstrap Machine is gone.
	BootstrapRemovedCondition = "BootstrapRemoved"
	// AvailableCondition is True while the API answers and every wanted control-plane Machine has a Node.
	AvailableCondition = "Available"
	// MachinesCreatedCondition is True while every Machine the control plane
	// wants exists, False with the reason one cannot be created (an
	// install-config that does not validate).
	MachinesCreatedCondition = "MachinesCreated"
	// MachinesReadyCondition summarises the control-plane Machines.
	MachinesReadyCondition = "MachinesReady"

	WaitingForInfrastructureReason = "WaitingForInfrastructure"
	InvalidInstallConfigReason     = "InvalidInstallConfig"
	InstallStateMissingReason      = "InstallStateMissing"
	BootstrapMachineCreatedReason  = "BootstrapMachineCreated"
	BootstrapProvisioningReason    = "BootstrapProvisioning"
	// WaitingForBootstrapAPIReason: the bootstrap node is provisioned and
	// its API is expected to answer soon; BootstrapNotServingReason once
	// it has not answered for the grace period.
	WaitingForBootstrapAPIReason = "WaitingForBootstrapAPI"
	BootstrapNotServingReason    = "BootstrapNotServing"
	BootstrapServingReason       = "BootstrapServing"
	WaitingForBootstrapReason    = "WaitingForBootstrap"
	WaitingForMastersReason      = "WaitingForMasters"
	InitializedReason            = "Initialized"
	BootstrapDeletingReason      = "BootstrapDeleting"
	BootstrapRemovedReason       = "BootstrapRemoved"
	APINotAnsweringReason        = "APINotAnswering"
	ScalingReason                = "Scaling"
	MachinesCreatedReason        = "MachinesCreated"
	ReadyReason                  = "Ready"
	DeletingReason               = "Deleting"
)

// MachineDeletionSpec bounds how long deleting a Machine may take.
type MachineDeletionSpec struct {
	// nodeDrainTimeoutSeconds bounds draining the Node; unset means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSeconds *int32 `json:"nodeDrainTimeoutSeconds,omitempty"`
	// nodeVolumeDetachTimeoutSeconds bounds waiting for volumes to detach.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeVolumeDetachTimeoutSeconds *int32 `json:"nodeVolumeDetachTimeoutSeconds,omitempty"`
	// nodeDeletionTimeoutSeconds bounds retrying the deletion of the Node.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDeletionTimeoutSeconds *int32 `json:"nodeDeletionTimeoutSeconds,omitempty"`
}

// MachineTemplateSpec is the spec of the control-plane Machines.
type MachineTemplateSpec struct {
	// infrastructureRef is the template the Machines' infrastructure is cloned from
	// (e.g. a MetalMachineTemplate); the bootstrap Machine uses it too.
	InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef"`
	// deletion bounds deleting a Machine.
	// +optional
	Deletion MachineDeletionSpec `json:"deletion,omitempty,omitzero"`
}

// MachineTemplate describes the control-plane Machines.
type MachineTemplate struct {
	// metadata is copied to every Machine.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the Machines.
	Spec MachineTemplateSpec `json:"spec"`
}

// SecretReference names a Secret in the control plane's namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// OpenShiftControlPlaneSpec is the desired control plane.
type OpenShiftControlPlaneSpec struct {
	// replicas is the number of masters.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	Replicas *int32 `json:"replicas,omitempty"`

	// version is the Kubernetes version of the control plane.
	// +optional
	Version string `json:"version,omitempty"`

	// distributionVersion is the OpenShift release, e.g. 4.20.0.
	// +kubebuilder:validation:MinLength=1
	DistributionVersion string `json:"distributionVersion"`

	// machineTemplate describes the Machines (masters and the bootstrap node).
	MachineTemplate MachineTemplate `json:"machineTemplate"`

	// installConfigRef is the Secret holding install-config.yaml.
	InstallConfigRef SecretReference `json:"installConfigRef"`

	// installStateRef is the Secret holding the installer's state: the root
	// CA (ca.crt, ca.key) and the admin kubeconfig.
	InstallStateRef SecretReference `json:"installStateRef"`

	// manifestsSelector selects the Secrets wrapping user manifests (annotated
	// install.openshift.io/manifest-type: manifest|openshift) that go into
	// the bootstrap node's config. Empty selects none.
	// +optional
	ManifestsSelector metav1.LabelSelector `json:"manifestsSelector,omitempty"`
}

// OpenShiftControlPlaneInitializationStatus holds the fields of the Cluster API contract.
type OpenShiftControlPlaneInitializationStatus struct {
	// controlPlaneInitialized is true once the masters serve the API and the
	// bootstrap node may go.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// Bootstrap phases.
const (
	BootstrapPhasePending      = "Pending"
	BootstrapPhaseProvisioning = "Provisioning"
	BootstrapPhaseServing      = "Serving"
	BootstrapPhaseRemoving     = "Removing"
	BootstrapPhaseRemoved      = "Removed"
)

// OpenShiftControlPlaneStatus is the observed control plane.
type OpenShiftControlPlaneStatus struct {
	// initialization holds the fields of the Cluster API contract.
	// +optional
	Initialization OpenShiftControlPlaneInitializationStatus `json:"initialization,omitempty,omitzero"`
	// replicas is the number of masters.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// readyReplicas is the number of masters whose Node is Ready.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`
	// availableReplicas is the number of masters that are available.
	// +optional
	AvailableReplicas *int32 `json:"availableReplicas,omitempty"`
	// upToDateReplicas is the number of masters matching the spec.
	// +optional
	UpToDateReplicas *int32 `json:"upToDateReplicas,omitempty"`
	// selector selects the masters (for the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
	// version is the Kubernetes version of the masters.
	// +optional
	Version string `json:"version,omitempty"`
	// distributionVersion is the OpenShift release installed.
	// +optional
	DistributionVersion string `json:"distributionVersion,omitempty"`
	// bootstrapPhase: Pending, Provisioning, Serving, Removing, Removed.
	// +optional
	BootstrapPhase string `json:"bootstrapPhase,omitempty"`
	// bootstrapMachine is the name of the bootstrap Machine.
	// +optional
	BootstrapMachine string `json:"bootstrapMachine,omitempty"`
	// conditions of the control plane.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=openshiftcontrolplanes,scope=Namespaced,categories=cluster-api;metalshift,shortName=ocp
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Initialized",type="boolean",JSONPath=".status.initialization.controlPlaneInitialized"
// +kubebuilder:printcolumn:name="Bootstrap",type="string",JSONPath=".status.bootstrapPhase"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".spec.distributionVersion"
// +kubebuilder:printcolumn:name="Reason",type="string",priority=1,JSONPath=".status.conditions[?(@.type==\"Available\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OpenShiftControlPlane brings up an OpenShift control plane: a bootstrap
// node, then the masters, then it removes the bootstrap node.
type OpenShiftControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenShiftControlPlaneSpec   `json:"spec,omitempty"`
	Status OpenShiftControlPlaneStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (c *OpenShiftControlPlane) GetConditions() []metav1.Condition { return c.Status.Conditions }

// DesiredReplicas is spec.replicas; the API defaults it to 3.
func (c *OpenShiftControlPlane) DesiredReplicas() int {
	if c.Spec.Replicas == nil {
		return 3
	}
	return int(*c.Spec.Replicas)
}

// SetConditions sets the conditions.
func (c *OpenShiftControlPlane) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// SetObservedGeneration sets status.observedGeneration.
func (c *OpenShiftControlPlane) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

// +kubebuilder:object:root=true

// OpenShiftControlPlaneList is a list of OpenShiftControlPlanes.
type OpenShiftControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenShiftControlPlane `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &OpenShiftControlPlane{}, &OpenShiftControlPlaneList{})
}
