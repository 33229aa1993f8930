package metalcluster

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

// TestClusterProvisionsOnMetalCluster drives a Cluster API Cluster that
// references a MetalCluster through the upstream Cluster controller: the
// Cluster takes the MetalCluster's endpoint and reports its infrastructure
// provisioned, and deleting the Cluster deletes the MetalCluster.
func TestClusterProvisionsOnMetalCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	mc := &infrav1.MetalCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec:       infrav1.MetalClusterSpec{ControlPlaneEndpoint: infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443}},
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MetalCluster", Name: mc.Name,
		}},
	}
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(HaveValue(BeTrue()))
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Host).To(Equal("192.0.2.10"))
		g.Expect(cluster.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
	}).Should(Succeed())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.Finalizers).To(ContainElement(infrav1.MetalClusterFinalizer))
	g.Expect(conditions.IsTrue(mc, infrav1.MetalClusterReadyCondition)).To(BeTrue())
	g.Expect(mc.OwnerReferences).To(ContainElement(HaveField("Name", cluster.Name)), "the Cluster controller adopts the MetalCluster")

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), mc))
	}).Should(BeTrue(), "deleting the Cluster deletes the MetalCluster and releases its finalizer")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	}).Should(BeTrue())
}

// TestMetalClusterWithoutEndpoint reports a condition that says what to set.
func TestMetalClusterWithoutEndpoint(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mc := &infrav1.MetalCluster{ObjectMeta: metav1.ObjectMeta{Name: "no-vip", Namespace: env.Namespace(t)}}
	g.Expect(env.Client.Create(ctx, mc)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		c := conditions.Get(mc, infrav1.MetalClusterReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.MetalClusterEndpointMissingReason))
		g.Expect(c.Message).To(ContainSubstring("API VIP"))
	}).Should(Succeed())
	g.Expect(mc.Status.Initialization.Provisioned).To(BeNil())
}
