package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NMStateConfigSpec is the static network of the hosts with the listed NICs.
type NMStateConfigSpec struct {
	// interfaces map the names used in config to the MAC addresses of a
	// host's NICs: a host gets this config when its MACs match.
	// +kubebuilder:validation:MinItems=1
	Interfaces []*Interface `json:"interfaces,omitempty"`
	// config is an nmstate document, kept as given.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	NetConfig *runtime.RawExtension `json:"config,omitempty"`
}

// Interface is one NIC of a host.
type Interface struct {
	// name of the NIC in config.
	Name string `json:"name"`
	// macAddress of the NIC.
	MacAddress string `json:"macAddress"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nmstateconfigs,scope=Namespaced,categories=metalshift

// NMStateConfig is the static network of one host, embedded in the images
// of the InfraEnvs that select it.
type NMStateConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NMStateConfigSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// NMStateConfigList is a list of NMStateConfigs.
type NMStateConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NMStateConfig `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &NMStateConfig{}, &NMStateConfigList{})
}
