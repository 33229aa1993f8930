package installstate

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
)

func inputs(overrides string) Inputs {
	aci := &hiveextv1.AgentClusterInstall{ObjectMeta: metav1.ObjectMeta{Name: "test-cluster", Namespace: "mynamespace"},
		Spec: hiveextv1.AgentClusterInstallSpec{
			ClusterDeploymentRef: corev1.LocalObjectReference{Name: "test-cluster"},
			Networking: hiveextv1.Networking{NetworkType: "OpenShiftSDN", ServiceNetwork: []string{"172.30.0.0/16"},
				ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}},
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 1},
		}}
	if overrides != "" {
		aci.Annotations = map[string]string{InstallConfigOverridesAnnotation: overrides}
	}
	cd := &hivev1.ClusterDeployment{Spec: hivev1.ClusterDeploymentSpec{ClusterName: "test-cluster", BaseDomain: "example.com"}}
	return Inputs{CD: cd, ACI: aci, Version: "4.16.3", SNOAddress: "192.168.111.20"}
}

// TestInstallConfigOverrides: the annotation is laid over the rendered
// install-config: objects merge, lists and scalars replace; what does not
// parse, or names a field the install-config does not have, is an
// *OverridesError with upstream's message.
func TestInstallConfigOverrides(t *testing.T) {
	const prefix = "Failed to parse 'agent-install.openshift.io/install-config-overrides' annotation: "
	for _, tt := range []struct {
		name      string
		overrides string
		check     func(g Gomega, ic *installconfig.InstallConfig)
		err       string
	}{
		{name: "none", check: func(g Gomega, ic *installconfig.InstallConfig) {
			g.Expect(ic.FIPS).To(BeFalse())
			g.Expect(ic.Networking.NetworkType).To(Equal("OpenShiftSDN"))
		}},
		{name: "the seed's", overrides: `{"networking":{"networkType": "OVNKubernetes"},"fips":true}`,
			check: func(g Gomega, ic *installconfig.InstallConfig) {
				g.Expect(ic.FIPS).To(BeTrue())
				g.Expect(ic.Networking.NetworkType).To(Equal("OVNKubernetes"))
				g.Expect(ic.Networking.ServiceNetwork).To(Equal([]string{"172.30.0.0/16"}), "objects merge: the rest of networking stays")
				g.Expect(ic.Networking.ClusterNetwork).To(HaveLen(1))
				g.Expect(ic.Metadata.Name).To(Equal("test-cluster"))
			}},
		{name: "lists replace", overrides: `{"networking":{"serviceNetwork":["172.31.0.0/16"]},"compute":[{"name":"worker","replicas":2}]}`,
			check: func(g Gomega, ic *installconfig.InstallConfig) {
				g.Expect(ic.Networking.ServiceNetwork).To(Equal([]string{"172.31.0.0/16"}))
				g.Expect(ic.Compute).To(HaveLen(1))
				g.Expect(*ic.Compute[0].Replicas).To(BeEquivalentTo(2))
				g.Expect(ic.Networking.NetworkType).To(Equal("OpenShiftSDN"))
			}},
		{name: "blank", overrides: "  ", check: func(g Gomega, ic *installconfig.InstallConfig) { g.Expect(ic.FIPS).To(BeFalse()) }},
		{name: "not JSON", overrides: `{"fips":true`, err: prefix + "unexpected EOF"},
		{name: "bad syntax", overrides: `{fips:true}`, err: prefix + "invalid character 'f' looking for beginning of object key string"},
		{name: "wrong type", overrides: `{"fips":"yes"}`, err: prefix + "json: cannot unmarshal string into Go struct field InstallConfig.fips of type bool"},
		{name: "unknown field", overrides: `{"fipz":true}`, err: prefix + `json: unknown field "fipz"`},
		{name: "not an object", overrides: `[1]`, err: prefix + "json: cannot unmarshal array into Go value of type installconfig.InstallConfig"},
		{name: "trailing data", overrides: `{"fips":true} {}`, err: prefix + "unexpected data after the JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ic, err := InstallConfig(inputs(tt.overrides))
			if tt.err != "" {
				g.Expect(err).To(MatchError(tt.err))
				var oe *OverridesError
				g.Expect(err).To(BeAssignableToTypeOf(oe))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, ic)
		})
	}
}

// TestStateOverridesAndManifests: the install state's install-config
// carries the overrides; its manifests go to the Secret and back, and
// into the bootstrap node's Ignition.
func TestStateOverridesAndManifests(t *testing.T) {
	g := NewWithT(t)
	in := inputs(`{"networking":{"networkType": "OVNKubernetes"},"fips":true}`)
	in.Manifests = map[string][]byte{"99_master_kernel_arg.yaml": []byte("kind: MachineConfig\n")}
	st, err := New(in)
	g.Expect(err).NotTo(HaveOccurred())
	var ic map[string]any
	g.Expect(yaml.Unmarshal(st.InstallConfig, &ic)).To(Succeed())
	g.Expect(ic).To(HaveKeyWithValue("fips", true))
	g.Expect(ic).To(HaveKeyWithValue("networking", HaveKeyWithValue("networkType", "OVNKubernetes")))
	parsed, err := installconfig.Parse(st.InstallConfig)
	g.Expect(err).NotTo(HaveOccurred(), "the bootstrap node reads it strictly")
	g.Expect(parsed.FIPS).To(BeTrue())

	data := st.Data()
	g.Expect(data).To(HaveKeyWithValue("manifests.openshift.99_master_kernel_arg.yaml", []byte("kind: MachineConfig\n")))
	back, err := FromData(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Manifests).To(Equal(in.Manifests))

	ign, err := HostIgnition(back, "test-cluster.example.com", "master", true, true, []byte(`{"auths":{}}`), "4.16.3", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(ign)).To(ContainSubstring("/opt/openshift/openshift/99_master_kernel_arg.yaml"))
}
