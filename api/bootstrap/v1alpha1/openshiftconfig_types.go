package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
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
	WaitingForInstallConfigReason        = "WaitingForInstallConfig"
	WaitingForInstallStateReason         = "WaitingForInstallState"
	WaitingForControlPlaneInitReason     = "WaitingForControlPlaneInitialized"
	InvalidInstallStateReason            = "InvalidInstallState"
	// InvalidInstallConfigReason: the bootstrap install-config holds secrets.
	InvalidInstallConfigReason = "InvalidInstallConfig"
	InvalidManifestsReason     = "InvalidManifests"
	// BootstrapNeedsControlPlaneReason: a bootstrap node's config has no
	// spec.bootstrap, which an OpenShiftControlPlane fills in.
	BootstrapNeedsControlPlaneReason = "BootstrapNeedsOpenShiftControlPlane"
	// UserDataTooLargeReason: the config exceeds what user data holds and
	// no ignition server is configured to serve it.
	UserDataTooLargeReason = "UserDataTooLarge"
)

// Keys of the Secrets a bootstrap node's config is rendered from.
const (
	// InstallConfigKey holds install-config.yaml: in the control plane's
	// install-config Secret as written, in the bootstrap install-config
	// Secret without pull secret and BMC credentials.
	InstallConfigKey = "install-config.yaml"
	// PullSecretKey holds the pull secret in the bootstrap install-config Secret.
	PullSecretKey = corev1.DockerConfigJsonKey
	// Keys of the install-state Secret: the cluster's root CA and the
	// admin kubeconfig (server = the API endpoint).
	InstallStateCACertKey     = "ca.crt"
	InstallStateCAKeyKey      = "ca.key"
	InstallStateKubeconfigKey = "kubeconfig"

	// ManifestAnnotation on a Secret wrapping user manifests says which
	// installer directory they come from: "manifest" (manifests/) or
	// "openshift" (openshift/); each key of the Secret is one file.
	ManifestAnnotation = "install.openshift.io/manifest-type"
	// ManifestTypeManifest and ManifestTypeOpenShift are its values.
	ManifestTypeManifest  = "manifest"
	ManifestTypeOpenShift = "openshift"
)

// SecretReference names a Secret in the config's namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// BootstrapInputs are what a bootstrap node's config is rendered from. The
// OpenShiftControlPlane that creates the bootstrap Machine writes them, as
// Cluster API's KubeadmControlPlane writes a KubeadmConfig's spec: the
// bootstrap provider renders what it is given and reads no control plane.
type BootstrapInputs struct {
	// installConfigRef is the Secret with the install-config the bootstrap
	// node receives (key install-config.yaml, with neither pull secret nor
	// BMC credentials) and the pull secret (key .dockerconfigjson).
	InstallConfigRef SecretReference `json:"installConfigRef"`

	// installStateRef is the Secret with the installer's state: the root CA
	// (ca.crt, ca.key) and the admin kubeconfig (kubeconfig).
	InstallStateRef SecretReference `json:"installStateRef"`

	// manifestsSelector selects the Secrets wrapping user manifests
	// (annotated install.openshift.io/manifest-type: manifest|openshift).
	// Empty selects none.
	// +optional
	ManifestsSelector metav1.LabelSelector `json:"manifestsSelector,omitempty"`

	// releaseVersion is the OpenShift release the bootstrap node installs, e.g. 4.20.0.
	// +kubebuilder:validation:MinLength=1
	ReleaseVersion string `json:"releaseVersion"`
}

// OpenShiftConfigSpec asks for the Ignition config of one machine.
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || (has(self.role) && self.role == 'bootstrap')",message="bootstrap is only for role bootstrap"
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

	// machineConfigServerHost is the host name or IP address (no scheme,
	// no port) where masters and workers fetch their
	// config from the machine-config-server (port 22623):
	// api-int.<cluster>.<baseDomain>. Empty means the Cluster's
	// control-plane endpoint host (the API VIP, which api-int resolves to).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)$`
	MachineConfigServerHost string `json:"machineConfigServerHost,omitempty"`

	// bootstrap holds the inputs of a bootstrap node's config (role
	// bootstrap); the OpenShiftControlPlane fills it in.
	// +optional
	Bootstrap *BootstrapInputs `json:"bootstrap,omitempty"`
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

// SetObservedGeneration sets status.observedGeneration.
func (c *OpenShiftConfig) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

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
