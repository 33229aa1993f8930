package metal3

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// TestArgs: how the Provisioning spec maps to the manager's command line
// (docs/cluster-baremetal-operator.md): the deploy server over https with the certificate the
// operator issues, never plain http but the boot listener on a
// provisioning network.
func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name               string
		spec               metal3v1.ProvisioningSpec
		deployURL, bootURL string // bootURL empty: no boot listener
		namespace          bool
	}{
		{"Managed", metal3v1.ProvisioningSpec{ProvisioningIP: "172.22.0.3"}, "https://172.22.0.3:6183", "http://172.22.0.3:6180", true},
		{"Unmanaged IPv6", metal3v1.ProvisioningSpec{ProvisioningNetwork: metal3v1.ProvisioningNetworkUnmanaged, ProvisioningIP: "fd00::3"},
			"https://[fd00::3]:6183", "http://[fd00::3]:6180", true},
		{"Disabled", metal3v1.ProvisioningSpec{ProvisioningNetwork: metal3v1.ProvisioningNetworkDisabled, ProvisioningIP: "172.22.0.3"}, "https://$(HOST_IP):6183", "", true},
		{"virtual media over the external network", metal3v1.ProvisioningSpec{ProvisioningIP: "172.22.0.3", VirtualMediaViaExternalNetwork: true},
			"https://$(HOST_IP):6183", "http://172.22.0.3:6180", true},
		{"every namespace", metal3v1.ProvisioningSpec{ProvisioningIP: "172.22.0.3", WatchAllNamespaces: true}, "https://172.22.0.3:6183", "http://172.22.0.3:6180", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			args := Args(&tc.spec)
			g.Expect(args).To(ContainElements("--components=host-engine", "--deploy-listen-address=:6183", "--deploy-url="+tc.deployURL,
				"--deploy-cert-file=/etc/metalshift/tls/tls.crt", "--deploy-key-file=/etc/metalshift/tls/tls.key", "--deploy-ca-file=/etc/metalshift/tls/ca.crt",
				"--signing-key-file=/etc/metalshift/signing-key/key"))
			g.Expect(args).NotTo(ContainElement(ContainSubstring("insecure-http")))
			if tc.bootURL != "" {
				g.Expect(args).To(ContainElements("--deploy-boot-listen-address=:6180", "--deploy-boot-url="+tc.bootURL))
			} else {
				g.Expect(args).NotTo(ContainElement(HavePrefix("--deploy-boot-")))
			}
			if tc.namespace {
				g.Expect(args).To(ContainElement("--namespace=openshift-machine-api"))
			} else {
				g.Expect(args).NotTo(ContainElement(HavePrefix("--namespace")))
			}
		})
	}
}

// TestDeployment: upstream's names, the owned annotation, the version on
// the pod template, and the DHCP settings only in Managed mode.
func TestDeployment(t *testing.T) {
	g := NewWithT(t)
	prov := &metal3v1.Provisioning{Spec: metal3v1.ProvisioningSpec{ProvisioningInterface: "enp1s0", ProvisioningIP: "172.22.0.3",
		ProvisioningNetworkCIDR: "172.22.0.0/24", ProvisioningDHCPRange: "172.22.0.10, 172.22.0.100"}}
	d := Deployment(prov, Options{Image: "img:1", Version: "1"})
	g.Expect(d.Namespace + "/" + d.Name).To(Equal("openshift-machine-api/metal3"))
	g.Expect(d.Annotations).To(HaveKeyWithValue("baremetal.openshift.io/owned", ""))
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{"k8s-app": "metal3", "baremetal.openshift.io/cluster-baremetal-operator": "metal3-state"}))
	g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(VersionAnnotation, "1"))
	g.Expect(d.Spec.Template.Spec.HostNetwork).To(BeTrue())
	env := d.Spec.Template.Spec.Containers[0].Env
	g.Expect(env).To(ContainElements(
		corev1.EnvVar{Name: "PROVISIONING_NETWORK", Value: "Managed"},
		corev1.EnvVar{Name: "PROVISIONING_INTERFACE", Value: "enp1s0"},
		corev1.EnvVar{Name: "DHCP_RANGE", Value: "172.22.0.10,172.22.0.100"}))

	again := Deployment(prov, Options{Image: "img:1", Version: "1"})
	g.Expect(again.Annotations[SpecHashAnnotation]).To(Equal(d.Annotations[SpecHashAnnotation]), "the hash is stable")
	upgraded := Deployment(prov, Options{Image: "img:2", Version: "2"})
	g.Expect(upgraded.Annotations[SpecHashAnnotation]).NotTo(Equal(d.Annotations[SpecHashAnnotation]))

	// The certificate files are the Secret the operator issues, mounted
	// where the arguments name them; the CA's key is not mounted.
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.VolumeMounts).To(ContainElement(And(HaveField("MountPath", "/etc/metalshift/tls"), HaveField("Name", "deploy-tls"))))
	g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Name", "deploy-tls"), HaveField("Secret.SecretName", DeployTLSSecret))))
	g.Expect(d.Spec.Template.Spec.Volumes).NotTo(ContainElement(HaveField("Secret.SecretName", DeployCASecret)))
	g.Expect(c.Ports).To(ContainElements(HaveField("ContainerPort", BeEquivalentTo(6183)), HaveField("ContainerPort", BeEquivalentTo(6180))))

	prov.Spec.ProvisioningNetwork = metal3v1.ProvisioningNetworkUnmanaged
	g.Expect(Deployment(prov, Options{}).Spec.Template.Spec.Containers[0].Env).NotTo(ContainElement(HaveField("Name", "DHCP_RANGE")))
	prov.Spec.ProvisioningNetwork = metal3v1.ProvisioningNetworkDisabled
	g.Expect(Deployment(prov, Options{}).Spec.Template.Spec.Containers[0].Ports).NotTo(ContainElement(HaveField("ContainerPort", BeEquivalentTo(BootPort))),
		"no network boot without a provisioning network")
}
