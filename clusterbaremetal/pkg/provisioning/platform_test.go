package provisioning

import (
	"testing"

	. "github.com/onsi/gomega"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// TestNetworkMode: provisioningNetwork wins; the deprecated
// provisioningDHCPExternal means Unmanaged; the default is Managed.
func TestNetworkMode(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&metal3v1.ProvisioningSpec{}).NetworkMode()).To(Equal(metal3v1.ProvisioningNetworkManaged))
	g.Expect((&metal3v1.ProvisioningSpec{ProvisioningDHCPExternal: true}).NetworkMode()).To(Equal(metal3v1.ProvisioningNetworkUnmanaged))
	g.Expect((&metal3v1.ProvisioningSpec{ProvisioningDHCPExternal: true, ProvisioningNetwork: metal3v1.ProvisioningNetworkDisabled}).NetworkMode()).
		To(Equal(metal3v1.ProvisioningNetworkDisabled))
}

// TestValidateDHCPExternal: a deprecated provisioningDHCPExternal spec is
// Unmanaged, which needs no DHCP range; Disabled-only platforms refuse it.
func TestValidateDHCPExternal(t *testing.T) {
	g := NewWithT(t)
	spec := &metal3v1.ProvisioningSpec{ProvisioningDHCPExternal: true, ProvisioningIP: "172.22.0.3", ProvisioningNetworkCIDR: "172.22.0.0/24"}
	g.Expect(Validate(spec, AllowedModes(configv1.BareMetalPlatformType))).To(Succeed())
	g.Expect(Validate(spec, AllowedModes(configv1.AWSPlatformType))).To(MatchError("ProvisioningNetwork Unmanaged is not supported"))
	g.Expect(Enabled(configv1.LibvirtPlatformType)).To(BeFalse())
}
