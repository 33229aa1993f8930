package agentclassification_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclassification"
)

const (
	sizeLabel = agentinstallv1.ClassificationLabelPrefix + "size"
	diskLabel = agentinstallv1.ClassificationLabelPrefix + "disk"
)

// TestClassification classifies two Agents with two classifications, one
// of whose queries fails on an Agent without disks, and follows their
// inventories as they change: labels set and removed, counts, the
// QueryErrors condition, no write when nothing changed, and deletion
// removing the labels before the finalizer goes.
func TestClassification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	large := newClassification(g, ns, "large", "size", "large", ".cpu.count >= 8")
	ssd := newClassification(g, ns, "ssd", "disk", "ssd", `[.disks[] | .driveType] | index("SSD") != null`)
	small := newAgent(g, ns, "small", inventory(4, agentinstallv1.HostDisk{ID: "/dev/sda", DriveType: "SSD"}))
	big := newAgent(g, ns, "big", inventory(16)) // no disks: .disks[] fails

	expectLabels(g, small, map[string]string{diskLabel: "ssd"}, sizeLabel)
	expectLabels(g, big, map[string]string{sizeLabel: "large", diskLabel: "QUERYERROR-ssd"})
	expectStatus(g, large, 1, 0, corev1.ConditionFalse, "NoQueryErrors", "No Agents failed to apply the classification")
	expectStatus(g, ssd, 1, 1, corev1.ConditionTrue, "HasQueryErrors", "1 Agents failed to apply the classification")
	g.Expect(large.Finalizers).To(ConsistOf(agentclassification.Finalizer))

	// Unrelated changes write nothing.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ssd), ssd)).To(Succeed())
	version := ssd.ResourceVersion
	patchLabels(g, big, map[string]string{"rack": "r1"})
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ssd), ssd)).To(Succeed())
		g.Expect(ssd.ResourceVersion).To(Equal(version))
	}).WithTimeout(time.Second).Should(Succeed())

	// The inventories change: small grows, big gets a disk.
	setInventory(g, small, inventory(8, agentinstallv1.HostDisk{ID: "/dev/sda", DriveType: "SSD"}))
	setInventory(g, big, inventory(16, agentinstallv1.HostDisk{ID: "/dev/nvme0n1", DriveType: "SSD"}))
	expectLabels(g, small, map[string]string{sizeLabel: "large", diskLabel: "ssd"})
	expectLabels(g, big, map[string]string{sizeLabel: "large", diskLabel: "ssd", "rack": "r1"})
	expectStatus(g, large, 2, 0, corev1.ConditionFalse, "NoQueryErrors", "No Agents failed to apply the classification")
	expectStatus(g, ssd, 2, 0, corev1.ConditionFalse, "NoQueryErrors", "No Agents failed to apply the classification")

	// A query edited to fail on every Agent.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ssd), ssd)).To(Succeed())
	ssd.Spec.Query = `.disks[0].driveType | test(1)`
	g.Expect(env.Client.Update(ctx, ssd)).To(Succeed())
	expectLabels(g, small, map[string]string{diskLabel: "QUERYERROR-ssd"})
	expectStatus(g, ssd, 0, 2, corev1.ConditionTrue, "HasQueryErrors", "2 Agents failed to apply the classification")

	// small shrinks: its label goes, big keeps its own.
	setInventory(g, small, inventory(2))
	expectLabels(g, small, nil, sizeLabel)
	expectStatus(g, large, 1, 0, corev1.ConditionFalse, "NoQueryErrors", "No Agents failed to apply the classification")

	// Deleting a classification removes its labels, then the finalizer.
	patchLabels(g, small, map[string]string{sizeLabel: "custom"}) // another value of the key: not ours
	g.Expect(env.Client.Delete(ctx, large)).To(Succeed())
	expectLabels(g, big, nil, sizeLabel)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(large), large))
	}).Should(BeTrue())
	expectLabels(g, small, map[string]string{sizeLabel: "custom"})
}

func newClassification(g Gomega, ns, name, key, value, query string) *agentinstallv1.AgentClassification {
	c := &agentinstallv1.AgentClassification{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.AgentClassificationSpec{LabelKey: key, LabelValue: value, Query: query}}
	g.Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	return c
}

func inventory(cpus int64, disks ...agentinstallv1.HostDisk) agentinstallv1.HardwareInventory {
	now := metav1.Now()
	return agentinstallv1.HardwareInventory{Hostname: "host", Cpu: agentinstallv1.HostCPU{Count: cpus},
		Memory: agentinstallv1.HostMemory{PhysicalBytes: 32 << 30}, Disks: disks, ReportTime: &now}
}

// newAgent creates an Agent as the service's registration and inventory
// step write it.
func newAgent(g Gomega, ns, name string, inv agentinstallv1.HardwareInventory) *agentinstallv1.Agent {
	a := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.AgentSpec{Role: agentinstallv1.HostRoleAutoAssign}}
	g.Expect(env.Client.Create(context.Background(), a)).To(Succeed())
	setInventory(g, a, inv)
	return a
}

func setInventory(g Gomega, a *agentinstallv1.Agent, inv agentinstallv1.HardwareInventory) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		a.Status.Inventory = inv
		return env.Client.Status().Update(ctx, a)
	}).Should(Succeed())
}

func patchLabels(g Gomega, a *agentinstallv1.Agent, labels map[string]string) {
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
	before := a.DeepCopy()
	for k, v := range labels {
		a.Labels[k] = v
	}
	g.Expect(env.Client.Patch(ctx, a, client.MergeFrom(before))).To(Succeed())
}

// expectLabels waits for an Agent to carry labels and none of absent.
func expectLabels(g Gomega, a *agentinstallv1.Agent, labels map[string]string, absent ...string) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		for k, v := range labels {
			g.Expect(a.Labels).To(HaveKeyWithValue(k, v))
		}
		for _, k := range absent {
			g.Expect(a.Labels).NotTo(HaveKey(k))
		}
	}).Should(Succeed())
}

func expectStatus(g Gomega, c *agentinstallv1.AgentClassification, matched, failed int, status corev1.ConditionStatus, reason, msg string) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.MatchedCount).To(Equal(matched))
		g.Expect(c.Status.ErrorCount).To(Equal(failed))
		g.Expect(c.Status.Conditions).To(ConsistOf(And(
			HaveField("Type", agentinstallv1.QueryErrorsCondition), HaveField("Status", status),
			HaveField("Reason", reason), HaveField("Message", msg),
		)))
	}).Should(Succeed())
}
