package provisioning_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
)

// TestClusterOperatorReasons walks the operator through every reason it
// reports (upstream's DeploymentCrashLooping is set by nobody), checking
// the five conditions, the version and the related objects at each.
func TestClusterOperatorReasons(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	runOperator(t, "4.20.0")
	ctx := context.Background()
	g := NewWithT(t)
	upgradeable := HaveKeyWithValue("Upgradeable", "True : ")
	notDisabled := HaveKeyWithValue("Disabled", "False : ")

	// WaitingForProvisioningCR: no Provisioning yet.
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True WaitingForProvisioningCR: Waiting for Provisioning CR"),
		HaveKeyWithValue("Progressing", "False WaitingForProvisioningCR: "),
		HaveKeyWithValue("Degraded", "False : "), upgradeable, notDisabled))
	g.Expect(operatorVersion(g)).To(Equal("4.20.0"))
	co := &configv1.ClusterOperator{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "baremetal"}, co)).To(Succeed())
	g.Expect(co.Annotations).To(HaveKeyWithValue("capability.openshift.io/name", "baremetal"))
	g.Expect(co.Status.RelatedObjects).To(ContainElements(
		configv1.ObjectReference{Resource: "namespaces", Name: "openshift-machine-api"},
		configv1.ObjectReference{Group: "metal3.io", Resource: "baremetalhosts", Namespace: "openshift-machine-api"},
		configv1.ObjectReference{Group: "metal3.io", Resource: "provisioning"},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-baremetal-operator"}))
	g.Expect(co.Status.RelatedObjects).To(HaveLen(11))

	// SyncingResources: the Deployment is applied, not rolled out yet.
	prov := newProvisioning(validManaged())
	g.Expect(env.Client.Create(ctx, prov)).To(Succeed())
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True SyncingResources: "),
		HaveKeyWithValue("Progressing", "True SyncingResources: Applying metal3 resources"),
		HaveKeyWithValue("Degraded", "False : "), upgradeable, notDisabled))
	g.Eventually(func(g Gomega) {
		d := deployment(g)
		g.Expect(d.Annotations).To(HaveKeyWithValue("baremetal.openshift.io/owned", ""))
		g.Expect(d.OwnerReferences).To(ContainElement(HaveField("Name", metal3v1.ProvisioningSingletonName)))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov)).To(Succeed())
		return prov.Finalizers
	}).Should(ContainElement("provisioning.metal3.io"))
	g.Eventually(func(g Gomega) int64 {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov)).To(Succeed())
		return prov.Status.ObservedGeneration
	}).Should(Equal(prov.Generation))

	// DeployComplete: its controller reports it rolled out.
	markRolledOut(t)
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True DeployComplete: metal3 pod is running"),
		HaveKeyWithValue("Progressing", "False DeployComplete: "),
		HaveKeyWithValue("Degraded", "False : "), upgradeable, notDisabled))

	// InvalidConfiguration: the platform no longer allows Managed.
	setPlatform(t, configv1.AWSPlatformType)
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True : "),
		HaveKeyWithValue("Progressing", "True InvalidConfiguration: Unable to apply Provisioning CR: invalid configuration"),
		HaveKeyWithValue("Degraded", "True InvalidConfiguration: ProvisioningNetwork Managed is not supported"),
		upgradeable, notDisabled))

	// DeployTimedOut: a new spec rolls the Deployment, which does not
	// roll out within five minutes of the operator's write.
	setPlatform(t, configv1.BareMetalPlatformType)
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Available", "True DeployComplete: metal3 pod is running"))
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov); err != nil {
			return err
		}
		prov.Spec.ProvisioningIP = "172.22.0.4"
		return env.Client.Update(ctx, prov)
	}).Should(Succeed())
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Progressing", "True SyncingResources: Applying metal3 resources"))
	// The condition said so before the change too: the Deployment is
	// looked at until the operator applied the new address.
	g.Eventually(func(g Gomega) []string { return deployment(g).Spec.Template.Spec.Containers[0].Args }).Should(ContainElement("--deploy-url=https://172.22.0.4:6183"))
	clk.Step(4 * time.Minute)
	poke(t)
	g.Consistently(clusterOperator, "300ms").Should(HaveKeyWithValue("Progressing", "True SyncingResources: Applying metal3 resources"))
	clk.Step(2 * time.Minute)
	poke(t)
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "True : "),
		HaveKeyWithValue("Progressing", "True DeployTimedOut: Applying metal3 resources"),
		HaveKeyWithValue("Degraded", "True DeployTimedOut: metal3 deployment rollout taking too long"),
		upgradeable, notDisabled))

	// ResourceNotFound: the Provisioning is deleted (another finalizer
	// keeps it a while): the Deployment goes, the operator lets go.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov); err != nil {
			return err
		}
		prov.Finalizers = append(prov.Finalizers, "test/hold")
		return env.Client.Update(ctx, prov)
	}).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, prov)).To(Succeed())
	g.Eventually(clusterOperator).Should(And(
		HaveKeyWithValue("Available", "False : "),
		HaveKeyWithValue("Progressing", "True ResourceNotFound: all Metal3 resources deleted"),
		HaveKeyWithValue("Degraded", "False ResourceNotFound: "),
		upgradeable, notDisabled))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeploymentName}, &appsv1.Deployment{}))
	}).Should(BeTrue())
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov)).To(Succeed())
		return prov.Finalizers
	}).Should(Equal([]string{"test/hold"}))
	prov.Finalizers = nil
	g.Expect(env.Client.Update(ctx, prov)).To(Succeed())
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Available", "True WaitingForProvisioningCR: Waiting for Provisioning CR"))
}

// TestPaused: a paused Provisioning is left alone — its Deployment keeps
// the old spec — until the annotation goes.
func TestPaused(t *testing.T) {
	reset(t, configv1.BareMetalPlatformType)
	runOperator(t, "4.20.0")
	ctx := context.Background()
	g := NewWithT(t)
	prov := newProvisioning(validManaged())
	prov.Annotations = map[string]string{metal3v1.ProvisioningPausedAnnotation: ""}
	g.Expect(env.Client.Create(ctx, prov)).To(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: metal3.Namespace, Name: metal3.DeploymentName}, &appsv1.Deployment{}))
	}, "500ms").Should(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov)).To(Succeed())
	g.Expect(prov.Finalizers).To(BeEmpty())
	delete(prov.Annotations, metal3v1.ProvisioningPausedAnnotation)
	g.Expect(env.Client.Update(ctx, prov)).To(Succeed())
	g.Eventually(clusterOperator).Should(HaveKeyWithValue("Progressing", "True SyncingResources: Applying metal3 resources"))
}
