package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of ClusterVersion and ClusterOperator.
const (
	OperatorAvailable   = "Available"
	OperatorProgressing = "Progressing"
	OperatorDegraded    = "Degraded"
	OperatorUpgradeable = "Upgradeable"
	// ClusterVersionFailing is ClusterVersion's Failing condition.
	ClusterVersionFailing = "Failing"
)

// ClusterOperatorStatusCondition is a condition of an operator or of the cluster version.
type ClusterOperatorStatusCondition struct {
	Type   string                 `json:"type"`
	Status metav1.ConditionStatus `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// OperandVersion is the version of one operand.
type OperandVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ClusterOperatorSpec is empty.
type ClusterOperatorSpec struct{}

// ClusterOperatorStatus is what an operator reports.
type ClusterOperatorStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []ClusterOperatorStatusCondition `json:"conditions,omitempty"`
	// +optional
	Versions []OperandVersion `json:"versions,omitempty"`
	// relatedObjects are the objects to look at when debugging the operator.
	// +optional
	RelatedObjects []ObjectReference `json:"relatedObjects,omitempty"`
}

// ObjectReference names an object, or a kind of objects (name empty), that
// an operator relates to.
type ObjectReference struct {
	// group of the referent; empty for the core group.
	Group string `json:"group"`
	// resource of the referent (plural).
	Resource string `json:"resource"`
	// namespace of the referent, for namespaced resources.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the referent; empty for every object of the resource.
	Name string `json:"name"`
}

// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusteroperators,scope=Cluster,shortName=co
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.versions[?(@.name==\"operator\")].version"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=".status.conditions[?(@.type==\"Available\")].status"
// +kubebuilder:printcolumn:name="Progressing",type="string",JSONPath=".status.conditions[?(@.type==\"Progressing\")].status"
// +kubebuilder:printcolumn:name="Degraded",type="string",JSONPath=".status.conditions[?(@.type==\"Degraded\")].status"
// +kubebuilder:printcolumn:name="Since",type="date",JSONPath=".status.conditions[?(@.type==\"Available\")].lastTransitionTime"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type==\"Progressing\")].message"

// ClusterOperator reports the state of one operator of an installed cluster.
type ClusterOperator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ClusterOperatorSpec `json:"spec"`
	// +optional
	Status ClusterOperatorStatus `json:"status"`
}

// +kubebuilder:object:root=true

// ClusterOperatorList is a list of ClusterOperators.
type ClusterOperatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterOperator `json:"items"`
}

// Release names a release of the cluster.
type Release struct {
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Image string `json:"image,omitempty"`
}

// UpdateHistory is one entry of ClusterVersion's history.
type UpdateHistory struct {
	// State is Partial or Completed.
	State       string      `json:"state"`
	StartedTime metav1.Time `json:"startedTime"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	Version        string       `json:"version"`
	// +optional
	Image string `json:"image,omitempty"`
	// +optional
	Verified bool `json:"verified,omitempty"`
}

// ClusterVersionSpec is the desired version.
type ClusterVersionSpec struct {
	ClusterID string `json:"clusterID"`
	// +optional
	DesiredUpdate *Release `json:"desiredUpdate,omitempty"`
}

// ClusterVersionStatus is the observed version.
type ClusterVersionStatus struct {
	// +optional
	Desired Release `json:"desired,omitempty"`
	// +optional
	History []UpdateHistory `json:"history,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []ClusterOperatorStatusCondition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterversions,scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.history[?(@.state==\"Completed\")].version"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=".status.conditions[?(@.type==\"Available\")].status"
// +kubebuilder:printcolumn:name="Progressing",type="string",JSONPath=".status.conditions[?(@.type==\"Progressing\")].status"
// +kubebuilder:printcolumn:name="Since",type="date",JSONPath=".status.conditions[?(@.type==\"Progressing\")].lastTransitionTime"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.conditions[?(@.type==\"Progressing\")].message"

// ClusterVersion (named "version") reports the installed cluster's version and install progress.
type ClusterVersion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterVersionSpec `json:"spec"`
	// +optional
	Status ClusterVersionStatus `json:"status"`
}

// +kubebuilder:object:root=true

// ClusterVersionList is a list of ClusterVersions.
type ClusterVersionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterVersion `json:"items"`
}

// FindCondition returns the condition of type t, or nil.
func FindCondition(conds []ClusterOperatorStatusCondition, t string) *ClusterOperatorStatusCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// SetCondition sets c in conds, keeping the transition time when the status is unchanged.
func SetCondition(conds *[]ClusterOperatorStatusCondition, c ClusterOperatorStatusCondition) {
	if old := FindCondition(*conds, c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.Now()
		}
		*old = c
		return
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.Now()
	}
	*conds = append(*conds, c)
}

func init() {
	objectTypes = append(objectTypes, &ClusterOperator{}, &ClusterOperatorList{}, &ClusterVersion{}, &ClusterVersionList{})
}
