package config

import (
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func TestOwnWebhooks(t *testing.T) {
	g := NewWithT(t)
	mutating, validating, err := OwnWebhooks()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mutating).To(BeEmpty())
	g.Expect(validating).To(HaveLen(1))
	var bmh *admissionregistrationv1.ValidatingWebhook
	for i, w := range validating[0].Webhooks {
		g.Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
		g.Expect(w.ClientConfig.Service.Path).NotTo(BeNil(), w.Name)
		if w.Name == "validation.baremetalhost.metal3.io" {
			bmh = &validating[0].Webhooks[i]
		}
	}
	g.Expect(bmh).NotTo(BeNil())
	g.Expect(*bmh.ClientConfig.Service.Path).To(Equal("/validate-metal3-io-v1alpha1-baremetalhost"))
	g.Expect(*bmh.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
	g.Expect(bmh.Rules).To(HaveLen(1))
	g.Expect(bmh.Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Create, admissionregistrationv1.Update))
	g.Expect(bmh.Rules[0].Resources).To(ConsistOf("baremetalhosts"))
}
