package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentClassification's label prefix and condition.
const (
	// ClassificationLabelPrefix + labelKey is the label set on classified
	// Agents, valued labelValue (QUERYERROR-<labelValue> when the query fails).
	ClassificationLabelPrefix = "agentclassification.agent-install.openshift.io/"

	// QueryErrorsCondition is True when the query failed on some Agents.
	QueryErrorsCondition ConditionType = "QueryErrors"
	// QueryHasErrorsReason: some Agents failed.
	QueryHasErrorsReason = "HasQueryErrors"
	// QueryNoErrorsReason: no Agent failed.
	QueryNoErrorsReason = "NoQueryErrors"
)

// AgentClassificationSpec labels the Agents whose inventory matches a query.
type AgentClassificationSpec struct {
	// labelKey is the label's key after the prefix; immutable.
	LabelKey string `json:"labelKey"`
	// labelValue is the label's value; immutable.
	LabelValue string `json:"labelValue"`
	// query is a gojq query on an Agent's inventory yielding true or false.
	Query string `json:"query"`
}

// AgentClassificationStatus counts the Agents classified.
type AgentClassificationStatus struct {
	// matchedCount is how many Agents the query matched.
	// +optional
	MatchedCount int `json:"matchedCount,omitempty"`
	// errorCount is how many Agents the query failed on.
	// +optional
	ErrorCount int `json:"errorCount,omitempty"`
	// conditions: QueryErrors.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=agentclassifications,scope=Namespaced,categories=metalshift
// +kubebuilder:subresource:status

// AgentClassification labels the Agents whose inventory matches a query.
type AgentClassification struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentClassificationSpec   `json:"spec,omitempty"`
	Status AgentClassificationStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentClassificationList is a list of AgentClassifications.
type AgentClassificationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentClassification `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &AgentClassification{}, &AgentClassificationList{})
}
