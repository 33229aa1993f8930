package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterDeploymentCondition is a condition of a ClusterDeployment, in
// hive's shape (not metav1.Condition: it has lastProbeTime and no
// observedGeneration). Hive mirrors the conditions of the cluster install
// as ClusterInstall<Type>.
type ClusterDeploymentCondition struct {
	// type of the condition, e.g. ClusterInstallCompleted.
	Type string `json:"type"`
	// status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// lastProbeTime is when the condition was last checked.
	// +optional
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// lastTransitionTime is when status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// reason is a CamelCase word for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message is for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClusterInstallCondition is a condition of a cluster install resource
// (AgentClusterInstall), in hive's shape: the same fields as
// ClusterDeploymentCondition.
type ClusterInstallCondition struct {
	// type of the condition, e.g. Completed.
	Type string `json:"type"`
	// status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// lastProbeTime is when the condition was last checked.
	// +optional
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`
	// lastTransitionTime is when status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// reason is a CamelCase word for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message is for people.
	// +optional
	Message string `json:"message,omitempty"`
}
