package assisted_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
)

// TestTenantReferences: a tenant with every right in namespace b and none
// elsewhere, writing through the API server as that user, cannot point an
// InfraEnv, an Agent or an AgentClusterInstall of its namespace at
// namespace a (its ClusterDeployment, Secrets, ConfigMaps), nor write
// anything in a: each refusal names the field. The same objects naming b
// go through. (assisted/tenancytest plays the hub without webhooks.)
func TestTenantReferences(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	a, b := env.Namespace(t), env.Namespace(t)
	tenant := env.Tenant(t, b)
	elsewhere := func(kind string) string {
		return `"` + a + `" is another namespace: a reference must stay in the ` + kind + `'s namespace "` + b + `"`
	}
	for _, ns := range []string{a, b} {
		g.Expect(env.Client.Create(ctx, &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"},
			Spec: hivev1.ClusterDeploymentSpec{ClusterName: "cluster", BaseDomain: "example.com"}})).To(Succeed())
	}

	refused := []struct {
		name  string
		obj   client.Object
		field string
		kind  string
	}{
		{name: "InfraEnv bound to a's cluster", field: "spec.clusterRef.namespace", kind: "InfraEnv",
			obj: &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "ie"}, Spec: agentinstallv1.InfraEnvSpec{
				PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: &agentinstallv1.ClusterReference{Namespace: a, Name: "cluster"}}}},
		{name: "InfraEnv with a's mirror registry", field: "spec.mirrorRegistryRef.namespace", kind: "InfraEnv",
			obj: &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "ie-mirror"}, Spec: agentinstallv1.InfraEnvSpec{
				PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, MirrorRegistryRef: &agentinstallv1.MirrorRegistryConfigMapReference{Namespace: a, Name: "m"}}}},
		{name: "Agent bound to a's cluster", field: "spec.clusterDeploymentName.namespace", kind: "Agent",
			obj: &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "agent"}, Spec: agentinstallv1.AgentSpec{
				ClusterDeploymentName: &agentinstallv1.ClusterReference{Namespace: a, Name: "cluster"}}}},
		{name: "Agent with a's ignition token", field: "spec.ignitionEndpointTokenReference.namespace", kind: "Agent",
			obj: &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "agent-token"}, Spec: agentinstallv1.AgentSpec{
				IgnitionEndpointTokenReference: &agentinstallv1.IgnitionEndpointTokenReference{Namespace: a, Name: "token"}}}},
		{name: "AgentClusterInstall with a's CA", field: "spec.ignitionEndpoint.caCertificateReference.namespace", kind: "AgentClusterInstall",
			obj: func() client.Object {
				aci := newACI("aci-ca", b)
				aci.Spec.IgnitionEndpoint = &hiveextv1.IgnitionEndpoint{URL: "https://ignition.example.com",
					CaCertificateReference: &hiveextv1.CaCertificateReference{Namespace: a, Name: "ca"}}
				return aci
			}()},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tenant.Create(ctx, tc.obj)
			g.Expect(err).To(MatchError(ContainSubstring(tc.field + ": " + elsewhere(tc.kind))))
			g.Expect(apierrors.IsBadRequest(err)).To(BeTrue(), "%v", err)
		})
	}

	// Bound in its own namespace, then moved to a's cluster: refused.
	agent := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "own"}, Spec: agentinstallv1.AgentSpec{
		ClusterDeploymentName: &agentinstallv1.ClusterReference{Namespace: b, Name: "cluster"}}}
	g.Expect(tenant.Create(ctx, agent)).To(Succeed())
	agent.Spec.ClusterDeploymentName.Namespace = a
	g.Expect(tenant.Update(ctx, agent)).To(MatchError(ContainSubstring("spec.clusterDeploymentName.namespace: " + elsewhere("Agent"))))
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "own"}, Spec: agentinstallv1.InfraEnvSpec{
		PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: &agentinstallv1.ClusterReference{Namespace: b, Name: "cluster"}}}
	g.Expect(tenant.Create(ctx, ie)).To(Succeed())

	// Nothing can be written in a directly: no Agent, no NMStateConfig.
	for _, o := range []client.Object{
		&agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "intruder"}},
		&agentinstallv1.NMStateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "intruder", Labels: map[string]string{"lab": a}}},
	} {
		err := tenant.Create(ctx, o)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%T: %v", o, err)
		var status apierrors.APIStatus
		g.Expect(errors.As(err, &status)).To(BeTrue())
		g.Expect(status.Status().Code).To(Equal(int32(http.StatusForbidden)))
	}
}
