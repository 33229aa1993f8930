package provisioning_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// invalidSpecs are specs breaking each rule of the reference, with the
// message (upstream's words, naming the field) a user gets.
var invalidSpecs = []struct {
	name    string
	spec    func(*metal3v1.ProvisioningSpec)
	message string
}{
	{"OS URL unparsable", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningOSDownloadURL = "not a url" },
		`the provisioningOSDownloadURL provided: "not a url" is invalid`},
	{"OS URL scheme", func(s *metal3v1.ProvisioningSpec) {
		s.ProvisioningOSDownloadURL = "ftp://h/rhcos.qcow2.gz?sha256=" + sha
	},
		`unsupported scheme "ftp" in provisioningOSDownloadURL ftp://h/rhcos.qcow2.gz?sha256=` + sha},
	{"OS URL without sha256", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningOSDownloadURL = "http://h/rhcos.qcow2.gz" },
		`the sha256 parameter in the provisioningOSDownloadURL "http://h/rhcos.qcow2.gz" is missing`},
	{"OS URL short sha256", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningOSDownloadURL = "http://h/rhcos.qcow2.gz?sha256=abc" },
		`the sha256 parameter in the provisioningOSDownloadURL "http://h/rhcos.qcow2.gz?sha256=abc" is invalid`},
	{"OS URL not a compressed qcow2", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningOSDownloadURL = "http://h/rhcos.iso?sha256=" + sha },
		`the provisioningOSDownloadURL provided: "http://h/rhcos.iso?sha256=` + sha + `" is an OS image and must end in .qcow2.gz or .qcow2.xz`},
	{"gateway outside Managed", func(s *metal3v1.ProvisioningSpec) {
		s.ProvisioningNetwork, s.ProvisioningNetworkGateway = metal3v1.ProvisioningNetworkUnmanaged, "172.22.0.1"
	}, `provisioningNetworkGateway "172.22.0.1" is only supported for Managed provisioningNetwork, not Unmanaged`},
	{"IP unparsable", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningIP = "172.22.0.300" },
		`could not parse provisioningIP "172.22.0.300"`},
	{"Disabled with a CIDR and no IP", func(s *metal3v1.ProvisioningSpec) {
		s.ProvisioningNetwork, s.ProvisioningIP, s.ProvisioningDHCPRange = metal3v1.ProvisioningNetworkDisabled, "", ""
	}, `could not parse provisioningIP ""`},
	{"CIDR unparsable", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkCIDR = "172.22.0.0/33" },
		`could not parse provisioningNetworkCIDR "172.22.0.0/33"`},
	{"Managed IPv6 wider than /64", func(s *metal3v1.ProvisioningSpec) {
		s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningDHCPRange = "fd00::3", "fd00::/48", "fd00::10,fd00::100"
	}, `provisioningNetworkCIDR mask must be greater than or equal to 64 for managed IPv6 networks`},
	{"IP outside the CIDR", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningIP = "172.23.0.3" },
		`provisioningIP "172.23.0.3" is not in the range defined by the provisioningNetworkCIDR "172.22.0.0/24"`},
	{"gateway unparsable", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkGateway = "gw" },
		`could not parse provisioningNetworkGateway "gw"`},
	{"gateway outside the CIDR", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.23.0.1" },
		`provisioningNetworkGateway "172.23.0.1" is not in the range defined by the provisioningNetworkCIDR "172.22.0.0/24"`},
	{"gateway is the IP", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.22.0.3" },
		`provisioningNetworkGateway "172.22.0.3" cannot be the same as provisioningIP "172.22.0.3"`},
	{"gateway is the network address", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.22.0.0" },
		`provisioningNetworkGateway "172.22.0.0" is not a usable host address (network or broadcast address)`},
	{"gateway is the broadcast address", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.22.0.255" },
		`provisioningNetworkGateway "172.22.0.255" is not a usable host address (network or broadcast address)`},
	{"DHCP range of three", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.22.0.10,172.22.0.20,172.22.0.30" },
		`"172.22.0.10,172.22.0.20,172.22.0.30" is not a valid provisioningDHCPRange.  DHCP range format: start_ip,end_ip`},
	{"DHCP range unparsable", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.22.0.10, x" },
		`could not parse provisioningDHCPRange, "x" is not a valid IP`},
	{"DHCP range outside the CIDR", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.22.0.10,172.22.1.100" },
		`invalid provisioningDHCPRange, IP "172.22.1.100" is not part of the provisioningNetworkCIDR "172.22.0.0/24"`},
	{"IP inside the DHCP range", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningIP = "172.22.0.50" },
		`invalid provisioningIP "172.22.0.50", value must be outside of the provisioningDHCPRange "172.22.0.10,172.22.0.100"`},
	{"gateway inside the DHCP range", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.22.0.20" },
		`invalid provisioningNetworkGateway "172.22.0.20", value must be outside of the provisioningDHCPRange "172.22.0.10,172.22.0.100"`},
	{"Managed without a DHCP range", func(s *metal3v1.ProvisioningSpec) { s.ProvisioningDHCPRange = "" },
		`provisioningDHCPRange is required in Managed mode but is not set`},
}

// TestWebhook: every rule is refused at admission with its message, on
// create and on update; a valid spec of each mode is admitted; only the
// singleton may be created.
func TestWebhook(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	ctx := context.Background()
	g := NewWithT(t)

	other := newProvisioning(validManaged())
	other.Name = "other"
	g.Expect(env.Client.Create(ctx, other)).To(MatchError(ContainSubstring(
		`Provisioning object is a singleton and must be named "provisioning-configuration"`)))

	for _, tc := range invalidSpecs {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := validManaged()
			tc.spec(&spec)
			err := env.Client.Create(ctx, newProvisioning(spec), client.DryRunAll)
			g.Expect(err).To(MatchError(And(ContainSubstring(`admission webhook "vprovisioning.kb.io" denied the request: `), ContainSubstring(tc.message))))
		})
	}

	unmanaged := metal3v1.ProvisioningSpec{ProvisioningNetwork: metal3v1.ProvisioningNetworkUnmanaged, ProvisioningIP: "172.22.0.3",
		ProvisioningNetworkCIDR: "172.22.0.0/24", ProvisioningNetworkGateway: "", ProvisioningOSDownloadURL: "https://h/rhcos.qcow2.xz?sha256=" + sha}
	for _, spec := range []metal3v1.ProvisioningSpec{validManaged(), unmanaged, {ProvisioningNetwork: metal3v1.ProvisioningNetworkDisabled}} {
		g.Expect(env.Client.Create(ctx, newProvisioning(spec), client.DryRunAll)).To(Succeed(), "%+v", spec)
	}

	prov := newProvisioning(validManaged())
	g.Expect(env.Client.Create(ctx, prov)).To(Succeed())
	prov.Spec.ProvisioningDHCPRange = "172.22.0.1,172.22.0.5"
	g.Expect(env.Client.Update(ctx, prov)).To(MatchError(ContainSubstring(
		`invalid provisioningIP "172.22.0.3", value must be outside of the provisioningDHCPRange "172.22.0.1,172.22.0.5"`)))
}

// TestValidatedOnReconcile: a spec the webhook did not see as invalid (it
// was written on a platform where the operator does nothing) is checked
// again when the operator reconciles: Degraded InvalidConfiguration with
// the rule's message, and no Deployment.
func TestValidatedOnReconcile(t *testing.T) {
	reset(t, configv1.ExternalPlatformType)
	runOperator(t, "4.20.0")
	ctx := context.Background()
	g := NewWithT(t)
	prov := newProvisioning(validManaged())
	g.Expect(env.Client.Create(ctx, prov)).To(Succeed())

	for _, tc := range invalidSpecs {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			setPlatform(t, configv1.ExternalPlatformType)
			g.Eventually(clusterOperator).Should(HaveKeyWithValue("Disabled", "True UnsupportedPlatform: Nothing to do on this Platform"))
			g.Eventually(func() error {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov); err != nil {
					return err
				}
				prov.Spec = validManaged()
				tc.spec(&prov.Spec)
				return env.Client.Update(ctx, prov)
			}).Should(Succeed())
			setPlatform(t, configv1.BareMetalPlatformType)
			g.Eventually(clusterOperator).Should(And(
				HaveKeyWithValue("Degraded", And(HavePrefix("True InvalidConfiguration: "), ContainSubstring(tc.message))),
				HaveKeyWithValue("Progressing", "True InvalidConfiguration: Unable to apply Provisioning CR: invalid configuration"),
				HaveKeyWithValue("Available", "True : "),
			))
		})
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-api", Name: "metal3"}, &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}})).To(MatchError(ContainSubstring("not found")))
}
