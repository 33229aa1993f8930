package provisioning

import (
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Modes are the provisioning-network modes a platform allows.
type Modes map[metal3v1.ProvisioningNetwork]bool

var (
	allModes = Modes{
		metal3v1.ProvisioningNetworkManaged:   true,
		metal3v1.ProvisioningNetworkUnmanaged: true,
		metal3v1.ProvisioningNetworkDisabled:  true,
	}
	disabledOnly = Modes{metal3v1.ProvisioningNetworkDisabled: true}
)

// platformModes is upstream's platform table: bare metal and platform None
// (user-provisioned) allow every mode; the clouds and virtualization
// platforms on which hosts may still be managed over virtual media allow
// Disabled only; any other platform (EquinixMetal, External, Nutanix,
// PowerVS, IBMCloud, empty, ...) allows none.
var platformModes = map[configv1.PlatformType]Modes{
	configv1.BareMetalPlatformType: allModes,
	configv1.NonePlatformType:      allModes,
	configv1.OpenStackPlatformType: disabledOnly,
	configv1.VSpherePlatformType:   disabledOnly,
	configv1.AWSPlatformType:       disabledOnly,
	configv1.AzurePlatformType:     disabledOnly,
	configv1.GCPPlatformType:       disabledOnly,
	configv1.KubevirtPlatformType:  disabledOnly,
}

// AllowedModes returns the modes platform allows; none for a platform off
// the table.
func AllowedModes(platform configv1.PlatformType) Modes {
	return platformModes[platform]
}

// Enabled tells whether the operator does anything on platform: whether it
// allows any mode. Elsewhere the operator reports Disabled and stops.
func Enabled(platform configv1.PlatformType) bool {
	return len(platformModes[platform]) > 0
}
