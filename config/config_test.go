package config

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestCRDs(t *testing.T) {
	g := NewWithT(t)
	own, err := CRDs(OwnCRDs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own).NotTo(BeEmpty())
	for _, crd := range own {
		if crd.Spec.Group == "infrastructure.cluster.x-k8s.io" {
			g.Expect(crd.Labels).To(HaveKey("cluster.x-k8s.io/v1beta2"), "%s carries the v1beta2 contract label", crd.Name)
		}
	}
	capi, err := CRDs(CAPICRDs)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, crd := range capi {
		names = append(names, crd.Name)
	}
	g.Expect(names).To(ContainElements("clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io",
		"machinedeployments.cluster.x-k8s.io", "machinehealthchecks.cluster.x-k8s.io"))
}

// TestCRDsGlobs: globs pick files, each file once; a glob matching no
// file is an error (a component naming a CRD that is not generated).
func TestCRDsGlobs(t *testing.T) {
	g := NewWithT(t)
	hosts, err := CRDs("crd/bases/metal3.io_*.yaml", "crd/bases/metal3.io_baremetalhosts.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, crd := range hosts {
		names = append(names, crd.Name)
	}
	g.Expect(names).To(Equal([]string{"baremetalhosts.metal3.io", "preprovisioningimages.metal3.io", "provisionings.metal3.io"}))

	_, err = CRDs("crd/bases/nothing_*.yaml")
	g.Expect(err).To(MatchError(ContainSubstring(`no CRD file matches "crd/bases/nothing_*.yaml"`)))
}

func TestCAPIWebhooks(t *testing.T) {
	g := NewWithT(t)
	mutating, validating, err := CAPIWebhooks()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mutating).To(HaveLen(1))
	g.Expect(validating).To(HaveLen(1))
	for _, w := range validating[0].Webhooks {
		g.Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
		g.Expect(w.ClientConfig.Service.Path).NotTo(BeNil(), w.Name)
	}
	g.Expect(validating[0].Webhooks).To(ContainElement(HaveField("Name", "validation.cluster.cluster.x-k8s.io")))
}

// TestRules: the roles parse; each provider's covers its own kinds,
// Cluster API's the core's, and the operator's writes are namespaced.
func TestRules(t *testing.T) {
	g := NewWithT(t)
	for name, kind := range map[string]string{
		"infrastructure-metal": "baremetalhosts", "bootstrap-openshift": "openshiftconfigs",
		"control-plane-openshift": "openshiftcontrolplanes", "addon-agent": "agents", "baremetal-operator": "provisionings",
	} {
		rbac, err := GeneratedRBAC(name)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(rbac.ClusterRules).To(ContainElement(HaveField("Resources", ContainElement(kind))), name)
	}
	operator, err := GeneratedRBAC("baremetal-operator")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(operator.Namespaced).To(HaveKeyWithValue("openshift-machine-api", ContainElement(HaveField("Resources", ContainElement("deployments")))))
	g.Expect(operator.ClusterRules).NotTo(ContainElement(HaveField("Resources", ContainElement("deployments"))))
	_, err = GeneratedRBAC("nothing")
	g.Expect(err).To(HaveOccurred())
	capi, err := CAPIRules()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(capi).To(ContainElement(And(HaveField("APIGroups", ContainElement("cluster.x-k8s.io")), HaveField("Resources", ContainElement("machines")))))
}
