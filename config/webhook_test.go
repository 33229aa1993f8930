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
	g.Expect(mutating).To(HaveLen(1))
	g.Expect(validating).To(HaveLen(1))

	type hook struct {
		path        string
		failure     admissionregistrationv1.FailurePolicyType
		sideEffects admissionregistrationv1.SideEffectClass
		resources   []string
		ops         []admissionregistrationv1.OperationType
	}
	got := map[string]hook{}
	for _, w := range mutating[0].Webhooks {
		g.Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
		g.Expect(w.ClientConfig.Service.Path).NotTo(BeNil(), w.Name)
		g.Expect(w.Rules).To(HaveLen(1), w.Name)
		got["mutating "+w.Name] = hook{*w.ClientConfig.Service.Path, *w.FailurePolicy, *w.SideEffects, w.Rules[0].Resources, w.Rules[0].Operations}
	}
	for _, w := range validating[0].Webhooks {
		g.Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
		g.Expect(w.ClientConfig.Service.Path).NotTo(BeNil(), w.Name)
		g.Expect(w.Rules).To(HaveLen(1), w.Name)
		got[w.Name] = hook{*w.ClientConfig.Service.Path, *w.FailurePolicy, *w.SideEffects, w.Rules[0].Resources, w.Rules[0].Operations}
	}
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	hooked := func(path, resource string) hook {
		return hook{path, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, []string{resource}, createUpdate}
	}
	g.Expect(got).To(Equal(map[string]hook{
		"validation.baremetalhost.metal3.io":                                     hooked("/validate-metal3-io-v1alpha1-baremetalhost", "baremetalhosts"),
		"validation.equinixmetalcluster.infrastructure.cluster.x-k8s.io":         hooked("/validate-infrastructure-cluster-x-k8s-io-v1alpha1-equinixmetalcluster", "equinixmetalclusters"),
		"validation.equinixmetalmachine.infrastructure.cluster.x-k8s.io":         hooked("/validate-infrastructure-cluster-x-k8s-io-v1alpha1-equinixmetalmachine", "equinixmetalmachines"),
		"validation.equinixmetalmachinetemplate.infrastructure.cluster.x-k8s.io": hooked("/validate-infrastructure-cluster-x-k8s-io-v1alpha1-equinixmetalmachinetemplate", "equinixmetalmachinetemplates"),
		"mutating default.agentclusterinstall.extensions.hive.openshift.io":      hooked("/mutate-extensions-hive-openshift-io-v1beta1-agentclusterinstall", "agentclusterinstalls"),
		"validation.agentclusterinstall.extensions.hive.openshift.io":            hooked("/validate-extensions-hive-openshift-io-v1beta1-agentclusterinstall", "agentclusterinstalls"),
		"validation.infraenv.agent-install.openshift.io":                         hooked("/validate-agent-install-openshift-io-v1beta1-infraenv", "infraenvs"),
		"validation.agent.agent-install.openshift.io":                            hooked("/validate-agent-install-openshift-io-v1beta1-agent", "agents"),
		"validation.agentclassification.agent-install.openshift.io":              hooked("/validate-agent-install-openshift-io-v1beta1-agentclassification", "agentclassifications"),
		// upstream's name and policy: the operator validates again on reconcile
		"vprovisioning.kb.io": {"/validate-metal3-io-v1alpha1-provisioning", admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone,
			[]string{"provisionings"}, createUpdate},
	}))
}
