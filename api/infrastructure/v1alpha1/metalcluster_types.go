package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetalClusterFinalizer lets the MetalCluster reconciler release what it
// set up for the cluster before the object goes away.
const MetalClusterFinalizer = "metalcluster.infrastructure.cluster.x-k8s.io"

// MetalCluster conditions and reasons.
const (
	// MetalClusterReadyCondition is True once the cluster's infrastructure is
	// provisioned: on bare metal that means the control-plane endpoint (the
	// API VIP) is known.
	MetalClusterReadyCondition = "Ready"

	// MetalClusterReadyReason is set when the infrastructure is provisioned.
	MetalClusterReadyReason = "Provisioned"

	// MetalClusterEndpointMissingReason is set while spec.controlPlaneEndpoint
	// has no host: set it to the API VIP of the cluster.
	MetalClusterEndpointMissingReason = "ControlPlaneEndpointMissing"
)

// APIEndpoint is the address at which a cluster's API server is reached.
type APIEndpoint struct {
	// host is the DNS name or IP address of the API server, on bare metal the API VIP.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`

	// port is the TCP port of the API server.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsZero reports whether the endpoint has no host.
func (e APIEndpoint) IsZero() bool {
	return e.Host == ""
}

// MetalClusterSpec is the desired state of the bare-metal infrastructure of a cluster.
type MetalClusterSpec struct {
	// controlPlaneEndpoint is the address of the cluster's API, the API VIP on
	// bare metal. Cluster API copies it to the Cluster.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// MetalClusterInitializationStatus is the provisioning state that the Cluster
// API infrastructure cluster contract reads.
type MetalClusterInitializationStatus struct {
	// provisioned is true once the infrastructure of the cluster is ready.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// MetalClusterStatus is the observed state of a MetalCluster.
type MetalClusterStatus struct {
	// initialization holds the fields of the Cluster API contract.
	// +optional
	Initialization MetalClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// conditions describe the state of the MetalCluster.
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
// +kubebuilder:resource:path=metalclusters,scope=Namespaced,categories=cluster-api;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this MetalCluster belongs to"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="API endpoint (API VIP)"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MetalCluster is the bare-metal infrastructure of a Cluster API Cluster.
type MetalCluster struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec MetalClusterSpec `json:"spec,omitempty"`

	// status is the observed state.
	// +optional
	Status MetalClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions, for sigs.k8s.io/cluster-api/util/conditions.
func (c *MetalCluster) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions sets the conditions, for sigs.k8s.io/cluster-api/util/conditions.
func (c *MetalCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// SetObservedGeneration sets status.observedGeneration.
func (c *MetalCluster) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

// +kubebuilder:object:root=true

// MetalClusterList is a list of MetalClusters.
type MetalClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MetalCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MetalCluster{}, &MetalClusterList{})
}
