package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionType is the type of a Condition.
type ConditionType string

// Condition is a condition of an InfraEnv, Agent or AgentClassification in
// the shape of openshift/custom-resource-status conditions/v1, which the
// assisted service uses: not metav1.Condition (it has lastHeartbeatTime,
// left unset, and no observedGeneration).
type Condition struct {
	// type of the condition.
	Type ConditionType `json:"type"`
	// status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// reason is a CamelCase word for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message is for people.
	// +optional
	Message string `json:"message,omitempty"`
	// lastHeartbeatTime is unused.
	// +optional
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// lastTransitionTime is when status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ClusterReference names a ClusterDeployment in any namespace.
type ClusterReference struct {
	// name of the ClusterDeployment.
	Name string `json:"name"`
	// namespace of the ClusterDeployment.
	Namespace string `json:"namespace"`
}
