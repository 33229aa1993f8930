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
