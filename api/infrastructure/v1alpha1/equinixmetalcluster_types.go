package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EquinixMetalClusterFinalizer lets the EquinixMetalCluster reconciler
// release the cluster's elastic IPs and DNS records before the object goes
// away.
const EquinixMetalClusterFinalizer = "equinixmetalcluster.infrastructure.cluster.x-k8s.io"

// EquinixMetalDefaultDeviceBootTimeout is the default of
// spec.deviceBootTimeout.
const EquinixMetalDefaultDeviceBootTimeout = 20 * time.Minute

// EquinixMetalDefaultMetadataURL is the metadata service of Equinix
// Metal's devices.
const EquinixMetalDefaultMetadataURL = "https://metadata.platformequinix.com"

// Tags the provider (and the installer) put on what they create in a
// project, so that it is found again from the API alone. Each is
// "<prefix><value>": the API filters devices by one whole tag.
const (
	// EquinixMetalClusterTagPrefix marks what belongs to a cluster: its
	// devices and its elastic IPs, "metalshift.io/cluster=<namespace>/<name>"
	// of its Cluster.
	EquinixMetalClusterTagPrefix = "metalshift.io/cluster="
	// EquinixMetalMachineTagPrefix marks a machine's device by the
	// EquinixMetalMachine's UID.
	EquinixMetalMachineTagPrefix = "metalshift.io/machine="
	// EquinixMetalRoleTagPrefix marks a device's role (control-plane or
	// worker) or an elastic IP's (api or ingress).
	EquinixMetalRoleTagPrefix = "metalshift.io/role="
)

// Roles, as tagged.
const (
	EquinixMetalRoleControlPlane = "control-plane"
	EquinixMetalRoleWorker       = "worker"
	EquinixMetalRoleAPI          = "api"
	EquinixMetalRoleIngress      = "ingress"
)

// EquinixMetalClusterTag is the tag of what belongs to the Cluster
// namespace/name.
func EquinixMetalClusterTag(namespace, name string) string {
	return EquinixMetalClusterTagPrefix + namespace + "/" + name
}

// Keys of the Secrets an EquinixMetalCluster names.
const (
	// EquinixMetalAPIKeyKey is the key of the credentials Secret holding
	// the Equinix Metal API key (a project or user key), sent as the
	// X-Auth-Token header. The provider reads it when it calls the API and
	// never copies it into another object, the devices' user data or a
	// status.
	EquinixMetalAPIKeyKey = "apiKey"
	// TSIGKeyNameKey is the key of the TSIG Secret holding the key's name,
	// as the DNS server knows it.
	TSIGKeyNameKey = "name"
	// TSIGAlgorithmKey is the key of the TSIG Secret holding the key's
	// algorithm (hmac-sha256 when absent).
	TSIGAlgorithmKey = "algorithm"
	// TSIGSecretKey is the key of the TSIG Secret holding the key itself,
	// base64 encoded as in a BIND key file.
	TSIGSecretKey = "secret"
)

// EquinixMetalCluster conditions and reasons.
const (
	// EquinixMetalClusterReadyCondition is True once the cluster's
	// infrastructure is provisioned: its elastic IPs are reserved, the
	// control-plane endpoint is known and, with spec.dns, the records are
	// written.
	EquinixMetalClusterReadyCondition = "Ready"

	// ElasticIPsReadyCondition is True once the API and ingress elastic IPs
	// are reserved in the cluster's metro (or facility).
	ElasticIPsReadyCondition = "ElasticIPsReady"
	// ElasticIPsReservedReason: both addresses are reserved.
	ElasticIPsReservedReason = "Reserved"
	// ElasticIPsPendingReason: the project is over its IP quota and a
	// reservation waits for approval.
	ElasticIPsPendingReason = "ReservationPending"
	// ElasticIPsFailedReason: the API refused a reservation.
	ElasticIPsFailedReason = "ReservationFailed"

	// DNSRecordsReadyCondition is True once the records of the API and the
	// ingress point at the elastic IPs on the server spec.dns names.
	DNSRecordsReadyCondition = "DNSRecordsReady"
	// DNSRecordsWrittenReason: the server accepted the records.
	DNSRecordsWrittenReason = "RecordsWritten"
	// DNSNotConfiguredReason: spec.dns is empty; the records are the
	// user's to write.
	DNSNotConfiguredReason = "NotConfigured"
	// DNSUpdateFailedReason: the server refused or did not answer the update.
	DNSUpdateFailedReason = "UpdateFailed"

	// CredentialsUnavailableReason: the credentials Secret is missing, has
	// no API key, or the API refused the key.
	CredentialsUnavailableReason = "CredentialsUnavailable"
)

// SecretReference names a Secret in the namespace of the object that holds
// the reference.
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EquinixMetalDNS is a DNS server that accepts dynamic updates (RFC 2136)
// signed with a TSIG key, where the provider writes the records of the
// cluster's API and ingress.
type EquinixMetalDNS struct {
	// server is the address of the DNS server, host or host:port (port 53
	// when absent).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Server string `json:"server"`
	// zone is the zone the records are written in, e.g. example.com: the
	// cluster's base domain or a zone above it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone"`
	// baseDomain is the cluster's base domain, zone or a domain within it
	// (zone when empty): the records are api.<cluster>.<baseDomain>,
	// api-int.<cluster>.<baseDomain> and *.apps.<cluster>.<baseDomain>,
	// <cluster> being the Cluster's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	BaseDomain string `json:"baseDomain,omitempty"`
	// tsigKeyRef names the Secret holding the TSIG key that signs the
	// updates, with the keys name, algorithm (optional) and secret.
	TSIGKeyRef SecretReference `json:"tsigKeyRef"`
}

// EquinixMetalClusterSpec is the desired state of a cluster's Equinix Metal
// infrastructure.
// +kubebuilder:validation:XValidation:rule="has(self.metro) != has(self.facility)",message="exactly one of metro or facility is required"
type EquinixMetalClusterSpec struct {
	// projectID is the Equinix Metal project the cluster's devices and
	// elastic IPs are in.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	ProjectID string `json:"projectID"`

	// metro is the metro (e.g. sv, da) where the cluster's devices and
	// elastic IPs are; exactly one of metro and facility is set.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	// +kubebuilder:validation:MaxLength=16
	Metro string `json:"metro,omitempty"`

	// facility is the facility (e.g. da11), for projects that still place
	// devices by facility; exactly one of metro and facility is set.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	// +kubebuilder:validation:MaxLength=16
	Facility string `json:"facility,omitempty"`

	// credentialsRef names the Secret, in the cluster's namespace, whose key
	// apiKey holds the API key.
	CredentialsRef SecretReference `json:"credentialsRef"`

	// apiURL is the base URL of the API; empty means Equinix Metal's
	// (https://api.equinix.com/metal/v1). Set it to reach the emulator.
	// The webhook checks it (no pattern here: the API server's refusal of
	// a pattern quotes the value, which may carry a password).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	APIURL string `json:"apiURL,omitempty"`

	// metadataURL is the base URL of the metadata service the cluster's
	// devices read (their addresses, their user data); empty means Equinix
	// Metal's (https://metadata.platformequinix.com). Set it to reach the
	// emulator's.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	MetadataURL string `json:"metadataURL,omitempty"`
	// deviceBootTimeout is how long a machine's device may be active
	// without its Node registering before the provider reinstalls it (a
	// device whose iPXE script could not be loaded, say while the hub was
	// down, sits in its boot loader). It does not apply to the bootstrap
	// machine, which registers no Node. 20m when empty.
	// +optional
	DeviceBootTimeout *metav1.Duration `json:"deviceBootTimeout,omitempty"`
	// controlPlaneEndpoint is the address of the cluster's API: the API
	// elastic IP (or its DNS name) and 6443. The provider sets it once the
	// IP is reserved, unless it is set already. Cluster API copies it to the
	// Cluster.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// dns, when set, is where the provider writes the records of the API
	// (api and api-int) and the ingress (*.apps) of the cluster.
	// +optional
	DNS *EquinixMetalDNS `json:"dns,omitempty"`
}

// EquinixMetalReservedIP is an elastic IP reserved for the cluster.
type EquinixMetalReservedIP struct {
	// address is the IP address.
	Address string `json:"address"`
	// reservationID is the ID of the IP reservation holding it, which the
	// provider releases when the cluster is deleted.
	ReservationID string `json:"reservationID"`
}

// EquinixMetalClusterInitializationStatus holds the fields of the Cluster
// API infrastructure cluster contract.
type EquinixMetalClusterInitializationStatus struct {
	// provisioned is true once the cluster's infrastructure is ready.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// EquinixMetalClusterStatus is the observed state of an EquinixMetalCluster.
type EquinixMetalClusterStatus struct {
	// initialization holds the fields of the Cluster API contract.
	// +optional
	Initialization EquinixMetalClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// apiIP is the elastic IP of the cluster's API.
	// +optional
	APIIP *EquinixMetalReservedIP `json:"apiIP,omitempty"`

	// ingressIP is the elastic IP of the cluster's ingress.
	// +optional
	IngressIP *EquinixMetalReservedIP `json:"ingressIP,omitempty"`

	// conditions describe the state of the EquinixMetalCluster.
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
// +kubebuilder:resource:path=equinixmetalclusters,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this EquinixMetalCluster belongs to"
// +kubebuilder:printcolumn:name="Project",type="string",JSONPath=".spec.projectID",description="Equinix Metal project"
// +kubebuilder:printcolumn:name="Metro",type="string",JSONPath=".spec.metro"
// +kubebuilder:printcolumn:name="Facility",type="string",JSONPath=".spec.facility",priority=1
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="API endpoint (API elastic IP)"
// +kubebuilder:printcolumn:name="Ingress",type="string",JSONPath=".status.ingressIP.address",priority=1,description="Ingress elastic IP"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// EquinixMetalCluster is the Equinix Metal infrastructure of a Cluster API
// Cluster: a project, a metro, the elastic IPs of its API and ingress.
type EquinixMetalCluster struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec is the desired state.
	Spec EquinixMetalClusterSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status EquinixMetalClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions, for sigs.k8s.io/cluster-api/util/conditions.
func (c *EquinixMetalCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions, for sigs.k8s.io/cluster-api/util/conditions.
func (c *EquinixMetalCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// SetObservedGeneration sets status.observedGeneration.
func (c *EquinixMetalCluster) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

// +kubebuilder:object:root=true

// EquinixMetalClusterList is a list of EquinixMetalClusters.
type EquinixMetalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EquinixMetalCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &EquinixMetalCluster{}, &EquinixMetalClusterList{})
}
