package webhooks_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// TestWebhookServed: the kube-apiserver refuses hosts the webhook refuses,
// with a message naming the field, and accepts valid ones.
func TestWebhookServed(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	host := func(name string) *metal3v1.BareMetalHost {
		return &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: metal3v1.BareMetalHostSpec{
				BMC:            metal3v1.BMCDetails{Address: "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1", CredentialsName: name + "-bmc"},
				BootMACAddress: "52:54:00:00:00:01",
			}}
	}
	refused := []struct {
		name, want string
		edit       func(h *metal3v1.BareMetalHost)
	}{
		{name: "other-ns", want: `spec.userData.namespace: Forbidden: must be the BareMetalHost's namespace "` + ns + `"`,
			edit: func(h *metal3v1.BareMetalHost) {
				h.Spec.UserData = &corev1.SecretReference{Name: "ud", Namespace: "kube-system"}
			}},
		{name: "bad-bmc", want: `spec.bmc.address: Invalid value: "ipmi://10.0.0.1:port": is not a URL`,
			edit: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.0.0.1:port" }},
		{name: "bmc-credentials", want: `spec.bmc.address: Invalid value: "redfish://redacted@10.0.0.1": must not carry a username or password`,
			edit: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "redfish://root:canary-bmc-password-1@10.0.0.1" }},
		// Passwords with the characters that end a URL's authority: no
		// part of them shows.
		{name: "bmc-password-delimiters", want: `spec.bmc.address: Invalid value: "redfish://redacted@10.0.0.1/redfish/v1/Systems/1": is not a URL`,
			edit: func(h *metal3v1.BareMetalHost) {
				h.Spec.BMC.Address = "redfish://root:canary1/canary2?canary3#canary4@canary5@10.0.0.1/redfish/v1/Systems/1"
			}},
		{name: "bmc-password-in-the-query", want: `spec.bmc.address: Invalid value: "ipmi://redacted@10.0.0.1": has an "@" in its path, query or fragment`,
			edit: func(h *metal3v1.BareMetalHost) { h.Spec.BMC.Address = "ipmi://root:623?canary-q@10.0.0.1" }},
		{name: "no-method", want: `spec.customDeploy.method: Required value`,
			edit: func(h *metal3v1.BareMetalHost) { h.Spec.CustomDeploy = &metal3v1.CustomDeploy{} }},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := host(tt.name)
			tt.edit(h)
			err := env.Client.Create(ctx, h)
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
			g.Expect(err.Error()).NotTo(ContainSubstring("canary"))
		})
	}

	g := NewWithT(t)
	ok := host("valid")
	ok.Spec.UserData = &corev1.SecretReference{Name: "ud", Namespace: ns}
	ok.Spec.MetaData = &corev1.SecretReference{Name: "md"}
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())

	// An update that adds a problem is refused too.
	ok.Spec.NetworkData = &corev1.SecretReference{Name: "nd", Namespace: "default"}
	err := env.Client.Update(ctx, ok)
	g.Expect(err).To(MatchError(ContainSubstring("spec.networkData.namespace: Forbidden")))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ok), ok)).To(Succeed())
	ok.Labels = map[string]string{"updated": "yes"}
	g.Expect(env.Client.Update(ctx, ok)).To(Succeed())
}

// TestTenantHosts: a tenant with every right in its namespace and none
// elsewhere (the API server acting as that user) cannot take another
// tenant's host's boot MAC address — with any spelling, on create or
// update — nor learn whose it is, nor bind its host into another
// namespace's cluster; its own hosts go through.
func TestTenantHosts(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	tenant := env.Tenant(t, nsB)
	host := func(ns, name, mac string) *metal3v1.BareMetalHost {
		return &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: metal3v1.BareMetalHostSpec{BMC: metal3v1.BMCDetails{Address: "redfish://10.0.0.1/redfish/v1/Systems/1", CredentialsName: name + "-bmc"},
				BootMACAddress: mac}}
	}
	victim := host(nsA, "victim-host", "52:54:00:ab:00:01")
	g.Expect(env.Client.Create(ctx, victim)).To(Succeed())
	// The webhook reads the manager's cache: wait until it holds the host.
	g.Eventually(func() error {
		return env.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(victim), &metal3v1.BareMetalHost{})
	}).Should(Succeed())

	const taken = `spec.bootMACAddress: Invalid value: "%s": another BareMetalHost on this hub has this boot MAC address`
	for _, mac := range []string{"52:54:00:ab:00:01", "52:54:00:AB:00:01", "52:54:00:Ab:00:01"} {
		err := tenant.Create(ctx, host(nsB, "copy", mac))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", mac, err)
		g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf(taken, mac)))
		g.Expect(err.Error()).NotTo(Or(ContainSubstring(nsA), ContainSubstring("victim")))
	}
	own := host(nsB, "own", "52:54:00:ab:00:02")
	g.Expect(tenant.Create(ctx, own)).To(Succeed())
	own.Spec.BootMACAddress = "52:54:00:ab:00:01"
	err := tenant.Update(ctx, own)
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf(taken, "52:54:00:ab:00:01"))))
	g.Expect(err.Error()).NotTo(ContainSubstring(nsA))

	// The victim's own updates go through, its MAC being its own.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim)).To(Succeed())
	victim.Labels = map[string]string{"updated": "yes"}
	g.Expect(env.Client.Update(ctx, victim)).To(Succeed())

	// A host joins its own namespace's clusters only.
	bound := host(nsB, "bound", "52:54:00:ab:00:03")
	bound.Annotations = map[string]string{"bmac.agent-install.openshift.io/cluster-reference": nsA + "/cluster"}
	err = tenant.Create(ctx, bound)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`metadata.annotations[bmac.agent-install.openshift.io/cluster-reference]: Forbidden: ` +
		`must name a ClusterDeployment of the BareMetalHost's namespace "` + nsB + `"`))
	bound.Annotations["bmac.agent-install.openshift.io/cluster-reference"] = nsB + "/cluster"
	g.Expect(tenant.Create(ctx, bound)).To(Succeed())

	// And the tenant has no rights in the other namespace at all.
	g.Expect(apierrors.IsForbidden(tenant.Create(ctx, host(nsA, "intruder", "52:54:00:ab:00:04")))).To(BeTrue())
}
