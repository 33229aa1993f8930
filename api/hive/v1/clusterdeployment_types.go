package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReconcilePauseAnnotation set to "true" holds a ClusterDeployment: the
// agent-based install treats it as holdInstallation.
const ReconcilePauseAnnotation = "hive.openshift.io/reconcile-pause"

// ClusterDeploymentSpec is the subset of hive's ClusterDeployment spec that
// the agent-based install uses.
type ClusterDeploymentSpec struct {
	// clusterName is the cluster's name, the first label of its domain.
	ClusterName string `json:"clusterName"`
	// baseDomain is the cluster's parent DNS domain.
	BaseDomain string `json:"baseDomain"`
	// pullSecretRef is a Secret (key .dockerconfigjson) for the release
	// images.
	// +optional
	PullSecretRef *corev1.LocalObjectReference `json:"pullSecretRef,omitempty"`
	// installed is true once the cluster is installed.
	// +optional
	Installed bool `json:"installed"`
	// preserveOnDelete keeps the cluster when this object is deleted.
	// +optional
	PreserveOnDelete bool `json:"preserveOnDelete,omitempty"`
	// clusterInstallRef is the resource that installs the cluster, an
	// AgentClusterInstall here.
	// +optional
	ClusterInstallRef *ClusterInstallLocalReference `json:"clusterInstallRef,omitempty"`
	// platform is where the cluster runs; hive demands exactly one.
	// +optional
	Platform Platform `json:"platform,omitempty"`
	// clusterMetadata identifies the installed cluster and its admin
	// credentials.
	// +optional
	ClusterMetadata *ClusterMetadata `json:"clusterMetadata,omitempty"`
}

// ClusterInstallLocalReference names a cluster install resource in the
// ClusterDeployment's namespace by group, version, kind and name.
type ClusterInstallLocalReference struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
}

// Platform is the cluster's platform; of hive's platforms only the agent's.
type Platform struct {
	// agentBareMetal: hosts are Agents.
	// +optional
	AgentBareMetal *AgentBareMetalPlatform `json:"agentBareMetal,omitempty"`
}

// AgentBareMetalPlatform is the platform of clusters installed with agents.
type AgentBareMetalPlatform struct {
	// agentSelector selects Agents; the agent-based install does not use it
	// (Agents are bound through spec.clusterDeploymentName).
	// +optional
	AgentSelector metav1.LabelSelector `json:"agentSelector,omitempty"`
}

// ClusterMetadata identifies an installed cluster.
type ClusterMetadata struct {
	// clusterID is the cluster's UUID (ClusterVersion spec.clusterID).
	ClusterID string `json:"clusterID"`
	// infraID prefixes the cluster's infrastructure names.
	InfraID string `json:"infraID"`
	// adminKubeconfigSecretRef is a Secret with the admin kubeconfig.
	AdminKubeconfigSecretRef corev1.LocalObjectReference `json:"adminKubeconfigSecretRef"`
	// adminPasswordSecretRef is a Secret with kubeadmin's password.
	// +optional
	AdminPasswordSecretRef *corev1.LocalObjectReference `json:"adminPasswordSecretRef,omitempty"`
}

// ClusterDeploymentStatus is what hive reports of the cluster.
type ClusterDeploymentStatus struct {
	// conditions, hive's shape.
	// +optional
	Conditions []ClusterDeploymentCondition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterdeployments,scope=Namespaced,shortName=cd,categories=metalshift
// +kubebuilder:subresource:status

// ClusterDeployment is one OpenShift cluster to install and then manage.
type ClusterDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterDeploymentSpec   `json:"spec,omitempty"`
	Status ClusterDeploymentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterDeploymentList is a list of ClusterDeployments.
type ClusterDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterDeployment `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ClusterDeployment{}, &ClusterDeploymentList{})
}
