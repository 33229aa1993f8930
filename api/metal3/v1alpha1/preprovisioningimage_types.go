package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImageFormat is the format of a preprovisioning image.
// +kubebuilder:validation:Enum=iso;initrd
type ImageFormat string

// Image formats.
const (
	ImageFormatISO    ImageFormat = "iso"
	ImageFormatInitRD ImageFormat = "initrd"
)

// PreprovisioningImage conditions.
const (
	// ImageReadyCondition is True when status.imageUrl can be booted.
	ImageReadyCondition = "Ready"
	// ImageErrorCondition is True when the image cannot be built.
	ImageErrorCondition = "Error"
)

// PreprovisioningImageSpec asks for a boot image for a host.
type PreprovisioningImageSpec struct {
	// networkDataName is a Secret with network configuration to embed.
	// +optional
	NetworkDataName string `json:"networkDataName,omitempty"`
	// architecture of the host, e.g. x86_64.
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// acceptFormats are the formats the host can boot.
	// +optional
	AcceptFormats []ImageFormat `json:"acceptFormats,omitempty"`
}

// SecretStatus records which version of a Secret was used.
type SecretStatus struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// PreprovisioningImageStatus is the image built for the host.
type PreprovisioningImageStatus struct {
	// imageUrl is where the image is served.
	// +optional
	ImageUrl string `json:"imageUrl,omitempty"` //nolint:revive // wire name
	// kernelUrl is where the kernel is served, for the initrd format.
	// +optional
	KernelUrl string `json:"kernelUrl,omitempty"` //nolint:revive // wire name
	// extraKernelParams to boot the initrd with.
	// +optional
	ExtraKernelParams string `json:"extraKernelParams,omitempty"`
	// format of the image.
	// +optional
	Format ImageFormat `json:"format,omitempty"`
	// networkData is the Secret version embedded.
	// +optional
	NetworkData SecretStatus `json:"networkData,omitempty"`
	// architecture of the image.
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// conditions Ready and Error.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ppimg,categories=metal3;metalshift
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"

// PreprovisioningImage is a boot image built for one host.
type PreprovisioningImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PreprovisioningImageSpec   `json:"spec,omitempty"`
	Status PreprovisioningImageStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PreprovisioningImageList is a list of PreprovisioningImages.
type PreprovisioningImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PreprovisioningImage `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &PreprovisioningImage{}, &PreprovisioningImageList{})
}

// ReadyISOURL returns the ISO the PreprovisioningImage serves: its
// status.imageUrl when its Ready condition is True and its format is iso;
// "" otherwise, and for a nil image.
func (p *PreprovisioningImage) ReadyISOURL() string {
	if p == nil || p.Status.ImageUrl == "" || p.Status.Format != ImageFormatISO {
		return ""
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, ImageReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return p.Status.ImageUrl
}
