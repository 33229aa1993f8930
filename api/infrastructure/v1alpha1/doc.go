// Package v1alpha1 holds the infrastructure.cluster.x-k8s.io/v1alpha1 types
// of metalshift's bare-metal infrastructure provider. It follows the Cluster
// API v1beta2 infrastructure contracts. It holds types, defaults and
// validation markers only: no client, no controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
