package openshiftcontrolplane

import (
	"context"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	"github.com/metalshift/metalshift/internal/testenv"
)

// holdFinalizer keeps a deleted Machine visible until the test releases it,
// so that the order of deletions can be read.
const holdFinalizer = "test.metalshift.io/hold"

// controlPlane reads the control plane.
func controlPlane(g Gomega, ns, name string) *controlplanev1.OpenShiftControlPlane {
	cp := &controlplanev1.OpenShiftControlPlane{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cp)).To(Succeed())
	return cp
}

// ownedMachines returns the Machines the control plane controls, by name.
func ownedMachines(g Gomega, cp *controlplanev1.OpenShiftControlPlane) map[string]*clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(cp.Namespace))).To(Succeed())
	out := map[string]*clusterv1.Machine{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], cp) {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out
}

func names(ms map[string]*clusterv1.Machine) []string {
	out := make([]string, 0, len(ms))
	for n := range ms {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func deleting(m *clusterv1.Machine) bool { return !m.DeletionTimestamp.IsZero() }

// updateMachine changes a Machine, retrying on conflicts with Cluster API's
// Machine controller.
func updateMachine(t *testing.T, ns, name string, status bool, change func(*clusterv1.Machine)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		m := &clusterv1.Machine{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return err
		}
		change(m)
		if status {
			return env.Client.Status().Update(context.Background(), m)
		}
		return env.Client.Update(context.Background(), m)
	}).Should(Succeed(), "updating Machine %s", name)
}

// joined plays Cluster API seeing the Machine's Node (or, with node "", losing it).
func joined(t *testing.T, ns, machine, node string) {
	t.Helper()
	updateMachine(t, ns, machine, true, func(m *clusterv1.Machine) { m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node} })
}

func hold(t *testing.T, ns, machine string) {
	t.Helper()
	updateMachine(t, ns, machine, false, func(m *clusterv1.Machine) {
		if !slices.Contains(m.Finalizers, holdFinalizer) {
			m.Finalizers = append(m.Finalizers, holdFinalizer)
		}
	})
}

// release lets a held Machine go: only the test's finalizer (Cluster API
// finishes the deletion), or every finalizer (the test plays Cluster API
// having drained a Node it cannot reach here).
func release(t *testing.T, ns, machine string, all bool) {
	t.Helper()
	updateMachine(t, ns, machine, false, func(m *clusterv1.Machine) {
		if all {
			m.Finalizers = nil
		} else {
			m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == holdFinalizer })
		}
	})
	NewWithT(t).Eventually(func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: machine}, &clusterv1.Machine{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "Machine %s is gone once released", machine)
}

func conditionOf(g Gomega, cp *controlplanev1.OpenShiftControlPlane, t string) metav1.Condition {
	c := conditions.Get(cp, t)
	g.Expect(c).NotTo(BeNil(), "condition %s", t)
	return *c
}

// TestControlPlaneLifecycle is the install path of the control plane, with
// the installed cluster played by a fake: the bootstrap Machine first and
// alone until its node serves the API; then the masters; the bootstrap
// Machine deleted only once every master joined and the bootstrap node
// reported the bootstrap complete; then a scale-down that deletes one master
// at a time, a master without a Node first, then the newest.
func TestControlPlaneLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := &fakeWorkload{}
	name, _ := applyInstall(t, w)
	ns := name
	bootstrap := name + "-bootstrap"
	masters := []string{name + "-master-0", name + "-master-1", name + "-master-2"}

	// The bootstrap Machine, alone while the API does not answer.
	var cp *controlplanev1.OpenShiftControlPlane
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(conditionOf(g, cp, controlplanev1.BootstrapReadyCondition).Reason).To(Equal(controlplanev1.BootstrapProvisioningReason))
	}).Should(Succeed(), "the reconciler asked the bootstrap node's API and it did not answer")
	g.Expect(cp.Status.BootstrapPhase).To(Equal(controlplanev1.BootstrapPhaseProvisioning))
	g.Expect(cp.Status.BootstrapMachine).To(Equal(bootstrap))
	g.Expect(names(ownedMachines(g, cp))).To(Equal([]string{bootstrap}), "no master before the bootstrap node serves")

	// The bootstrap node serves: the masters are created.
	w.ready.Store(true)
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		c := conditionOf(g, cp, controlplanev1.BootstrapReadyCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(controlplanev1.BootstrapServingReason))
		g.Expect(cp.Status.BootstrapPhase).To(Equal(controlplanev1.BootstrapPhaseServing))
		g.Expect(names(ownedMachines(g, cp))).To(Equal(append([]string{bootstrap}, masters...)))
	}).Should(Succeed())
	for _, m := range ownedMachines(g, cp) {
		if m.Name == bootstrap {
			continue
		}
		g.Expect(m.Labels).To(HaveKey(clusterv1.MachineControlPlaneLabel), m.Name)
		g.Expect(m.Labels).NotTo(HaveKey(controlplanev1.BootstrapMachineLabel), m.Name)
		g.Expect(m.Spec.Version).To(Equal(cp.Spec.Version), m.Name)
		cfg := &bootstrapv1.OpenShiftConfig{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.Bootstrap.ConfigRef.Name}, cfg)).To(Succeed())
		g.Expect(cfg.Spec.Role).To(Equal(bootstrapv1.RoleMaster), m.Name)
	}
	initialized := func(msg string) func(g Gomega) {
		return func(g Gomega) {
			cp = controlPlane(g, ns, name)
			c := conditionOf(g, cp, controlplanev1.ControlPlaneInitializedCondition)
			g.Expect(c.Reason).To(Equal(controlplanev1.WaitingForMastersReason))
			g.Expect(c.Message).To(Equal(msg))
		}
	}
	g.Eventually(initialized("0 of 3 masters joined the cluster; the bootstrap node has not reported the bootstrap complete yet")).Should(Succeed())

	// Two masters joined and the bootstrap complete: not yet.
	joined(t, ns, masters[0], "node-0")
	joined(t, ns, masters[1], "node-1")
	w.complete.Store(true)
	g.Eventually(initialized("2 of 3 masters joined the cluster")).Should(Succeed())
	g.Expect(ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false)).To(BeFalse())
	g.Expect(deleting(ownedMachines(g, cp)[bootstrap])).To(BeFalse(), "the bootstrap node stays until every master joined")

	// Every master joined, but the bootstrap node has not reported: not yet.
	w.complete.Store(false)
	joined(t, ns, masters[2], "node-2")
	g.Eventually(initialized("3 of 3 masters joined the cluster; the bootstrap node has not reported the bootstrap complete yet")).Should(Succeed())
	g.Expect(ptr.Deref(cp.Status.Initialization.ControlPlaneInitialized, false)).To(BeFalse())
	g.Expect(deleting(ownedMachines(g, cp)[bootstrap])).To(BeFalse(), "the bootstrap node stays until it reports the bootstrap complete")

	// Both: initialized, and the bootstrap Machine goes.
	before := scrape(g)
	w.complete.Store(true)
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(cp.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()))
		c := conditionOf(g, cp, controlplanev1.ControlPlaneInitializedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(controlplanev1.InitializedReason))
		c = conditionOf(g, cp, controlplanev1.BootstrapRemovedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(controlplanev1.BootstrapRemovedReason))
		g.Expect(cp.Status.BootstrapPhase).To(Equal(controlplanev1.BootstrapPhaseRemoved))
	}).Should(Succeed())
	g.Expect(names(ownedMachines(g, cp))).To(Equal(masters), "the bootstrap Machine is gone and not made again")
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-bootstrap-install-config"}, &corev1.Secret{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "the bootstrap node's install-config and pull secret copy goes with it")
	g.Expect(cp.Status.Version).To(Equal(cp.Spec.Version))
	g.Expect(cp.Status.Replicas).To(HaveValue(BeEquivalentTo(3)))
	installs := expectMetrics(t, cp, before)

	// After initialization, an install-config that no longer validates
	// blocks a scale-up, and the MachinesCreated condition says why.
	ic := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cp.Spec.InstallConfigRef.Name}, ic)).To(Succeed())
	good := ic.Data[controlplanev1.InstallConfigKey]
	ic.Data[controlplanev1.InstallConfigKey] = []byte("apiVersion: v1\n")
	g.Expect(env.Client.Update(ctx, ic)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, cp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := conditionOf(g, controlPlane(g, ns, name), controlplanev1.MachinesCreatedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controlplanev1.InvalidInstallConfigReason))
		g.Expect(c.Message).To(ContainSubstring("spec.installConfigRef"))
	}).Should(Succeed())
	g.Expect(names(ownedMachines(g, controlPlane(g, ns, name)))).To(Equal(masters), "no Machine from an install-config that does not validate")
	g.Expect(env.Client.Patch(ctx, cp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)))).To(Succeed())
	ic.Data[controlplanev1.InstallConfigKey] = good
	g.Expect(env.Client.Update(ctx, ic)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := conditionOf(g, controlPlane(g, ns, name), controlplanev1.MachinesCreatedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(Equal("3 of 3 masters exist"))
	}).Should(Succeed())

	// Scale down to 1. master-1 lost its Node: it goes first, alone.
	for _, m := range masters {
		hold(t, ns, m)
	}
	joined(t, ns, masters[1], "")
	g.Eventually(func(g Gomega) {
		m := &clusterv1.Machine{}
		g.Expect(env.Manager.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: masters[1]}, m)).To(Succeed())
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeFalse())
	}).Should(Succeed(), "the reconciler's cache shows master-1 without its Node")
	g.Expect(env.Client.Patch(ctx, cp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`)))).To(Succeed())
	gen := cp.Generation
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(cp.Status.ObservedGeneration).To(Equal(gen))
		g.Expect(deleting(ownedMachines(g, cp)[masters[1]])).To(BeTrue())
	}).Should(Succeed(), "the master without a Node is deleted first")
	// A reconcile that sees master-1 deleting (a spec change it observes
	// after that) deletes no other.
	g.Expect(env.Client.Patch(ctx, cp, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"machineTemplate":{"metadata":{"annotations":{"test.metalshift.io/poke":"1"}}}}}`)))).To(Succeed())
	gen = cp.Generation
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(cp.Status.ObservedGeneration).To(Equal(gen))
	}).Should(Succeed())
	ms := ownedMachines(g, cp)
	g.Expect(deleting(ms[masters[0]]) || deleting(ms[masters[2]])).To(BeFalse(), "one master at a time")
	release(t, ns, masters[1], true)

	// Then the newest of the two left, and still one at a time.
	var victim, survivor *clusterv1.Machine
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(cp.Status.Replicas).To(HaveValue(BeEquivalentTo(2)))
		ms := ownedMachines(g, cp)
		g.Expect(names(ms)).To(Equal([]string{masters[0], masters[2]}))
		var del []*clusterv1.Machine
		for _, m := range ms {
			if deleting(m) {
				del = append(del, m)
			} else {
				survivor = m
			}
		}
		g.Expect(del).To(HaveLen(1), "one master at a time")
		victim = del[0]
	}).Should(Succeed())
	g.Expect(victim.CreationTimestamp.Before(&survivor.CreationTimestamp)).To(BeFalse(),
		"the newest goes: %s created %v, %s created %v", victim.Name, victim.CreationTimestamp, survivor.Name, survivor.CreationTimestamp)
	release(t, ns, victim.Name, true)
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(cp.Status.Replicas).To(HaveValue(BeEquivalentTo(1)))
	}).Should(Succeed())
	ms = ownedMachines(g, cp)
	g.Expect(names(ms)).To(Equal([]string{survivor.Name}))
	g.Expect(deleting(ms[survivor.Name])).To(BeFalse(), "spec.replicas masters are kept")
	count, _ := scrape(g).Histogram(installHistogram)
	g.Expect(count).To(Equal(installs), "the install is observed once, whatever the reconciles after it")
}

// TestDeleteInOrder: deleting the control plane deletes the bootstrap
// Machine first, the masters once it is gone, and releases the control
// plane's finalizer only after the last Machine.
func TestDeleteInOrder(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := &fakeWorkload{}
	w.ready.Store(true) // the bootstrap node serves, the bootstrap is not complete
	name, _ := applyInstall(t, w)
	ns := name
	bootstrap := name + "-bootstrap"
	masters := []string{name + "-master-0", name + "-master-1", name + "-master-2"}

	var cp *controlplanev1.OpenShiftControlPlane
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(names(ownedMachines(g, cp))).To(Equal(append([]string{bootstrap}, masters...)))
	}).Should(Succeed())
	for _, m := range append([]string{bootstrap}, masters...) {
		hold(t, ns, m)
	}

	g.Expect(env.Client.Delete(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		g.Expect(conditionOf(g, cp, controlplanev1.AvailableCondition).Reason).To(Equal(controlplanev1.DeletingReason))
		g.Expect(deleting(ownedMachines(g, cp)[bootstrap])).To(BeTrue())
	}).Should(Succeed(), "the bootstrap Machine is deleted first")
	ms := ownedMachines(g, cp)
	for _, m := range masters {
		g.Expect(deleting(ms[m])).To(BeFalse(), "%s waits for the bootstrap Machine", m)
	}
	g.Expect(cp.Finalizers).To(ContainElement(controlplanev1.OpenShiftControlPlaneFinalizer))

	release(t, ns, bootstrap, false)
	g.Eventually(func(g Gomega) {
		cp = controlPlane(g, ns, name)
		ms := ownedMachines(g, cp)
		g.Expect(names(ms)).To(Equal(masters))
		for _, m := range ms {
			g.Expect(deleting(m)).To(BeTrue(), m.Name)
		}
	}).Should(Succeed(), "then the masters")

	// The control plane stays while any Machine does: each status written
	// after a master went still finds it there, with its finalizer.
	for i, m := range masters[:2] {
		release(t, ns, m, false)
		g.Eventually(func(g Gomega) {
			cp = controlPlane(g, ns, name)
			g.Expect(cp.Status.Replicas).To(HaveValue(BeEquivalentTo(len(masters) - 1 - i)))
		}).Should(Succeed(), fmt.Sprintf("after %s went", m))
		g.Expect(cp.Finalizers).To(ContainElement(controlplanev1.OpenShiftControlPlaneFinalizer))
	}
	release(t, ns, masters[2], false)
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &controlplanev1.OpenShiftControlPlane{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "the finalizer goes with the last Machine")
}

// scrape reads the manager's metrics endpoint.
func scrape(g Gomega) testenv.Metrics {
	m, err := testenv.Scrape(context.Background(), env.MetricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	return m
}

// expectMetrics checks the metrics endpoint once cp finished its install,
// since the scrape before: the install observed once, with the duration
// its own timestamps tell, and the gauge of control planes by bootstrap
// phase and availability equal to the counts listed from the API, every
// phase reported. It returns the installs observed in all.
func expectMetrics(t *testing.T, cp *controlplanev1.OpenShiftControlPlane, before testenv.Metrics) uint64 {
	t.Helper()
	g := NewWithT(t)
	const histogram = installHistogram
	count0, sum0 := before.Histogram(histogram)
	var after testenv.Metrics
	g.Eventually(func(g Gomega) {
		after = scrape(g)
		count, _ := after.Histogram(histogram)
		g.Expect(count).To(Equal(count0 + 1))
	}).Should(Succeed(), "the install is observed once")
	_, sum := after.Histogram(histogram)
	removed := conditionOf(g, cp, controlplanev1.BootstrapRemovedCondition)
	// Within a second: a reconcile that read an older copy from the cache
	// after the transition writes the condition again, with its own time.
	g.Expect(sum-sum0).To(BeNumerically("~", removed.LastTransitionTime.Sub(cp.CreationTimestamp.Time).Seconds(), 1),
		"from the control plane's creation to BootstrapRemoved")

	const gauge = "metalshift_openshiftcontrolplanes"
	g.Eventually(func(g Gomega) {
		list := &controlplanev1.OpenShiftControlPlaneList{}
		g.Expect(env.Client.List(context.Background(), list)).To(Succeed())
		want := map[string]float64{}
		for _, c := range list.Items {
			want[fmt.Sprintf("%s/%t", c.Status.BootstrapPhase, conditions.IsTrue(&c, controlplanev1.AvailableCondition))]++
		}
		m := scrape(g)
		g.Expect(m.Counts(gauge, "bootstrap_phase", "available")).To(Equal(want))
		g.Expect(m.Series(gauge, "bootstrap_phase", "available")).To(ContainElements("Pending/false", "Serving/false", "Removing/false", "Removed/true"))
	}).Should(Succeed(), "the gauge counts the control planes in the API")
	return count0 + 1
}

const installHistogram = "metalshift_openshiftcontrolplane_install_duration_seconds"

// TestMastersJoinedWithoutNodeRef: Cluster API sets a Machine's nodeRef
// only when it reconciles the Machine, and watches the cluster's Nodes
// only once the control plane is initialized; a master whose Node
// registered after its Machine's last reconcile has none. Its Node, found
// by the Machine's providerID, counts: the control plane initializes.
func TestMastersJoinedWithoutNodeRef(t *testing.T) {
	g := NewWithT(t)
	w := &fakeWorkload{}
	name, _ := applyInstall(t, w)
	ns := name
	masters := []string{name + "-master-0", name + "-master-1", name + "-master-2"}
	w.ready.Store(true)
	g.Eventually(func(g Gomega) {
		cp := controlPlane(g, ns, name)
		g.Expect(len(ownedMachines(g, cp))).To(Equal(4))
	}).Should(Succeed())
	for i, m := range masters {
		id := fmt.Sprintf("metal3://%s/host-%d/%s", ns, i, m)
		updateMachine(t, ns, m, false, func(m *clusterv1.Machine) { m.Spec.ProviderID = id })
		w.nodes.Store(id, true)
	}
	w.complete.Store(true)
	g.Eventually(func(g Gomega) {
		cp := controlPlane(g, ns, name)
		g.Expect(cp.Status.Initialization.ControlPlaneInitialized).To(HaveValue(BeTrue()))
		g.Expect(conditionOf(g, cp, controlplanev1.ControlPlaneInitializedCondition).Message).To(Equal("3 masters joined and the bootstrap is complete"))
	}).Should(Succeed())
}
