package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Roles of an OpenShift machine.
const (
	RoleBootstrap = "bootstrap"
	RoleMaster    = "master"
	RoleWorker    = "worker"
)

// OpenShiftConfig conditions and reasons.
const (
	// DataSecretAvailableCondition is True once the Ignition Secret exists.
	DataSecretAvailableCondition = "DataSecretAvailable"

	DataSecretCreatedReason              = "DataSecretCreated"
	WaitingForControlPlaneEndpointReason = "WaitingForControlPlaneEndpoint"
	WaitingForClusterCAReason            = "WaitingForClusterCA"
	InvalidIgnitionOverrideReason        = "InvalidIgnitionOverride"
	WaitingForControlPlaneReason         = "WaitingForControlPlane"
	WaitingForInstallConfigReason        = "WaitingForInstallConfig"
	WaitingForInstallStateReason         = "WaitingForInstallState"
	WaitingForControlPlaneInitReason     = "WaitingForControlPlaneInitialized"
	InvalidInstallConfigReason           = "InvalidInstallConfig"
	InvalidInstallStateReason            = "InvalidInstallState"
	InvalidManifestsReason               = "InvalidManifests"
	BootstrapNeedsControlPlaneReason     = "BootstrapNeedsOpenShiftControlPlane"
	// UserDataTooLargeReason: the config exceeds what user data holds and
	// no ignition server is configured to serve it.
	UserDataTooLargeReason = "UserDataTooLarge"
)

// OpenShiftConfigSpec asks for the Ignition config of one machine.
type OpenShiftConfigSpec struct {
	// role of the machine; derived from the Machine when empty: control-plane
	// Machines are masters, the others workers.
	// +kubebuilder:validation:Enum=bootstrap;master;worker
	// +optional
	Role string `json:"role,omitempty"`

	// ignitionOverride is an Ignition config (JSON, spec 3.x) merged after
	// the rendered one.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	IgnitionOverride string `json:"ignitionOverride,omitempty"`
}

// OpenShiftConfigInitializationStatus holds the fields of the Cluster API contract.
type OpenShiftConfigInitializationStatus struct {
	// dataSecretCreated is true once status.dataSecretName names the Secret.
	// +optional
	DataSecretCreated *bool `json:"dataSecretCreated,omitempty"`
}

// OpenShiftConfigStatus is the observed state of an OpenShiftConfig.
type OpenShiftConfigStatus struct {
	// initialization holds the fields of the Cluster API contract.
	// +optional
	Initialization OpenShiftConfigInitializationStatus `json:"initialization,omitempty,omitzero"`
	// dataSecretName is the Secret with the Ignition config (key value, format ignition).
	// +optional
	DataSecretName *string `json:"dataSecretName,omitempty"`
	// role rendered.
	// +optional
	Role string `json:"role,omitempty"`
	// conditions of the OpenShiftConfig.
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
// +kubebuilder:resource:path=openshiftconfigs,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".status.role"
// +kubebuilder:printcolumn:name="Data Secret",type="string",JSONPath=".status.dataSecretName"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"DataSecretAvailable\")].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// OpenShiftConfig renders the Ignition config of one OpenShift machine.
type OpenShiftConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenShiftConfigSpec   `json:"spec,omitempty"`
	Status OpenShiftConfigStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (c *OpenShiftConfig) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions.
func (c *OpenShiftConfig) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// +kubebuilder:object:root=true

// OpenShiftConfigList is a list of OpenShiftConfigs.
type OpenShiftConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenShiftConfig `json:"items"`
}

// OpenShiftConfigTemplateResource is the template of an OpenShiftConfig.
type OpenShiftConfigTemplateResource struct {
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +optional
	Spec OpenShiftConfigSpec `json:"spec,omitempty"`
}

// OpenShiftConfigTemplateSpec is the spec of an OpenShiftConfigTemplate.
type OpenShiftConfigTemplateSpec struct {
	Template OpenShiftConfigTemplateResource `json:"template"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=openshiftconfigtemplates,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"

// OpenShiftConfigTemplate is cloned into an OpenShiftConfig per Machine.
type OpenShiftConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec OpenShiftConfigTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// OpenShiftConfigTemplateList is a list of OpenShiftConfigTemplates.
type OpenShiftConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenShiftConfigTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &OpenShiftConfig{}, &OpenShiftConfigList{}, &OpenShiftConfigTemplate{}, &OpenShiftConfigTemplateList{})
}
