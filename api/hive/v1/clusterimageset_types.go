package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterImageSetSpec names an OpenShift release.
type ClusterImageSetSpec struct {
	// releaseImage is the release payload's pull spec.
	ReleaseImage string `json:"releaseImage"`
}

// ClusterImageSetStatus is empty: nothing reports on an image set.
type ClusterImageSetStatus struct{}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterimagesets,scope=Cluster,shortName=imgset,categories=metalshift
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Release",type="string",JSONPath=".spec.releaseImage"

// ClusterImageSet is a release that clusters can be installed with
// (AgentClusterInstall spec.imageSetRef).
type ClusterImageSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterImageSetSpec   `json:"spec,omitempty"`
	Status ClusterImageSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterImageSetList is a list of ClusterImageSets.
type ClusterImageSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterImageSet `json:"items"`
}

// ClusterImageSetReference names a ClusterImageSet.
type ClusterImageSetReference struct {
	// name of the ClusterImageSet.
	Name string `json:"name"`
}

func init() {
	objectTypes = append(objectTypes, &ClusterImageSet{}, &ClusterImageSetList{})
}
