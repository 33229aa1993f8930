package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentServiceConfigName is the name of the one AgentServiceConfig the
// agent service reads.
const AgentServiceConfigName = "agent"

// AgentServiceConfigSpec configures the agent service. metalshift reads
// osImages; the storage and mirror fields of upstream are accepted and not
// used (the service keeps no database and no image files).
type AgentServiceConfigSpec struct {
	// osImages are the OS images installs write, by OpenShift version and
	// CPU architecture. metalshift writes url to the installation disk as
	// a raw whole-disk image (upstream: the live ISO coreos-installer
	// derives the disk image from).
	// +optional
	OSImages []OSImage `json:"osImages,omitempty"`
	// mirrorRegistryRef names a ConfigMap with registries.conf and a CA
	// bundle for mirror registries; accepted, not used yet.
	// +optional
	MirrorRegistryRef *LocalObjectReference `json:"mirrorRegistryRef,omitempty"`
}

// LocalObjectReference names an object in the service's namespace.
type LocalObjectReference struct {
	// name of the object.
	Name string `json:"name"`
}

// OSImage is one OS image.
type OSImage struct {
	// openshiftVersion is the OpenShift minor version, e.g. "4.16".
	OpenshiftVersion string `json:"openshiftVersion"`
	// version is the OS image's own version.
	// +optional
	Version string `json:"version,omitempty"`
	// url of the image.
	URL string `json:"url"`
	// rootFSUrl is upstream's live rootfs URL; not used by metalshift.
	// +optional
	RootFSUrl string `json:"rootFSUrl,omitempty"`
	// cpuArchitecture of the image; x86_64 when empty.
	// +optional
	CPUArchitecture string `json:"cpuArchitecture,omitempty"`
	// checksum is metalshift's: "<sha256|sha512>:<hex>" of the image at
	// url, checked by the agent after it writes the disk.
	// +optional
	Checksum string `json:"checksum,omitempty"`
}

// AgentServiceConfigStatus reports the service.
type AgentServiceConfigStatus struct {
	// conditions of the service.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=agentserviceconfigs,scope=Cluster,categories=metalshift
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'agent'",message="the AgentServiceConfig must be named agent"

// AgentServiceConfig configures the agent service (singleton "agent").
type AgentServiceConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentServiceConfigSpec   `json:"spec,omitempty"`
	Status AgentServiceConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentServiceConfigList is a list of AgentServiceConfigs.
type AgentServiceConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentServiceConfig `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &AgentServiceConfig{}, &AgentServiceConfigList{})
}
