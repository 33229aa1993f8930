package metalmachine

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// availableHost creates a host in the state the host engine leaves an
// inspected host in (this test runs the provider without the engine).
func availableHost(t *testing.T, ns, name string, lbls map[string]string) *metal3v1.BareMetalHost {
	t.Helper()
	g := NewWithT(t)
	h := &metal3v1.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Spec:       metal3v1.BareMetalHostSpec{BMC: metal3v1.BMCDetails{Address: "redfish://bmc/redfish/v1/Systems/" + name, CredentialsName: name + "-bmc"}},
	}
	g.Expect(env.Client.Create(context.Background(), h)).To(Succeed())
	setHostStatus(t, h, metal3v1.StateAvailable)
	return h
}

func setHostStatus(t *testing.T, h *metal3v1.BareMetalHost, state metal3v1.ProvisioningState) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(h), h); err != nil {
			return err
		}
		h.Status.OperationalStatus = metal3v1.OperationalStatusOK
		h.Status.Provisioning.State = state
		h.Status.HardwareDetails = &metal3v1.HardwareDetails{NIC: []metal3v1.NIC{{Name: "eno1", MAC: "52:54:00:00:00:01", IP: "192.0.2.21"}}}
		return env.Client.Status().Update(context.Background(), h)
	}).Should(Succeed())
}

// newMachine creates a Cluster, a bootstrap Secret, a MetalMachine and a
// Machine that references both, as a MachineSet would.
func newMachine(t *testing.T, ns, name string, sel map[string]string) (*clusterv1.Machine, *infrav1.MetalMachine) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	mc := &infrav1.MetalCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns},
		Spec: infrav1.MetalClusterSpec{ControlPlaneEndpoint: infrav1.APIEndpoint{Host: "192.0.2.10", Port: 6443}}}
	if err := env.Client.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns}, Spec: clusterv1.ClusterSpec{
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MetalCluster", Name: "c1"},
	}}
	if err := env.Client.Create(ctx, cluster); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte(`{"ignition":{"version":"3.4.0"}}`), "format": []byte("ignition")}}
	g.Expect(env.Client.Create(ctx, boot)).To(Succeed())
	mm := &infrav1.MetalMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: infrav1.MetalMachineSpec{
			Image:        infrav1.Image{URL: "http://images/rhcos.raw", Checksum: "abc", ChecksumType: "sha256"},
			HostSelector: metav1.LabelSelector{MatchLabels: sel},
		},
	}
	g.Expect(env.Client.Create(ctx, mm)).To(Succeed())
	// Labelled as control plane: Cluster API holds worker Machines until a
	// control plane is initialized, and these tests run without one.
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c1",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(boot.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MetalMachine", Name: mm.Name,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	return m, mm
}

// TestClaimProvisionRelease: a Machine on a MetalMachine claims the matching
// host, gives it image and bootstrap data, and upstream Cluster API moves the
// Machine to Provisioned once the host is; deleting it releases the host.
func TestClaimProvisionRelease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	availableHost(t, ns, "other", map[string]string{"role": "master"})
	host := availableHost(t, ns, "worker-0", map[string]string{"role": "worker"})
	machine, mm := newMachine(t, ns, "worker-a", map[string]string{"role": "worker"})

	var phases []string
	record := func(p string) {
		if p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
		record(machine.Status.Phase)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
		g.Expect(host.Spec.ConsumerRef).NotTo(BeNil())
		g.Expect(host.Spec.ConsumerRef.Name).To(Equal(mm.Name))
		g.Expect(host.Spec.Image).NotTo(BeNil())
		g.Expect(host.Spec.Online).To(BeTrue())
		g.Expect(host.Spec.UserData).NotTo(BeNil())
	}).Should(Succeed())
	ud := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: host.Spec.UserData.Name}, ud)).To(Succeed())
	g.Expect(string(ud.Data["userData"])).To(Equal(`{"ignition":{"version":"3.4.0"}}`))

	// Without a bootstrap config object (the data Secret is given directly),
	// upstream Cluster API never sets bootstrapDataSecretCreated, so the
	// Machine stays Pending, not Provisioning, while its host provisions.
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
		record(machine.Status.Phase)
		g.Expect(machine.Status.Phase).To(Equal(string(clusterv1.MachinePhasePending)))
		g.Expect(machine.Spec.ProviderID).To(BeEmpty(), "no providerID before the host runs the image")
	}, "1s").Should(Succeed())

	setHostStatus(t, host, metal3v1.StateProvisioned)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(machine), machine)).To(Succeed())
		record(machine.Status.Phase)
		g.Expect(machine.Status.Phase).To(Equal(string(clusterv1.MachinePhaseProvisioned)))
		g.Expect(machine.Spec.ProviderID).To(Equal(fmt.Sprintf("metal3://%s/worker-0/%s", ns, mm.Name)))
		g.Expect(machine.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: "192.0.2.21"}))
	}).Should(Succeed())
	g.Expect(phases).To(Equal([]string{"Pending", "Provisioned"}), "never Provisioning without a bootstrap config object")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm)).To(Succeed())
	g.Expect(conditions.IsTrue(mm, infrav1.MetalMachineReadyCondition)).To(BeTrue())

	g.Expect(env.Client.Delete(ctx, machine)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
		g.Expect(host.Spec.ConsumerRef).To(BeNil())
		g.Expect(host.Spec.Image).To(BeNil())
		g.Expect(host.Spec.Online).To(BeFalse())
	}).Should(Succeed(), "the host is released and deprovisions")
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm)) }).Should(BeTrue())
}

// TestNeverTwoMachinesOnOneHost: five machines race for three hosts.
func TestNeverTwoMachinesOnOneHost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	for i := range 3 {
		availableHost(t, ns, fmt.Sprintf("h%d", i), nil)
	}
	var mms []*infrav1.MetalMachine
	for i := range 5 {
		_, mm := newMachine(t, ns, fmt.Sprintf("m%d", i), nil)
		mms = append(mms, mm)
	}
	g.Eventually(func(g Gomega) {
		hosts := &metal3v1.BareMetalHostList{}
		g.Expect(env.Client.List(ctx, hosts, client.InNamespace(ns))).To(Succeed())
		consumers := map[string]bool{}
		for _, h := range hosts.Items {
			g.Expect(h.Spec.ConsumerRef).NotTo(BeNil())
			g.Expect(consumers).NotTo(HaveKey(h.Spec.ConsumerRef.Name), "two hosts for one machine")
			consumers[h.Spec.ConsumerRef.Name] = true
		}
		waiting := 0
		for _, mm := range mms {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm)).To(Succeed())
			if c := conditions.Get(mm, infrav1.HostClaimedCondition); c != nil && c.Reason == infrav1.NoHostAvailableReason {
				waiting++
				g.Expect(c.Message).To(ContainSubstring("No available BareMetalHost"))
			}
		}
		g.Expect(waiting).To(Equal(2))
	}).Should(Succeed())
}

// TestPausedByCluster: while its Cluster is paused a MetalMachine says so
// in its Paused condition and claims no host; resumed, it claims one.
func TestPausedByCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	host := availableHost(t, ns, "h0", map[string]string{"role": "paused"})
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns}, Spec: clusterv1.ClusterSpec{
		Paused:            ptr.To(true),
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MetalCluster", Name: "c1"},
	}}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	_, mm := newMachine(t, ns, "paused-a", map[string]string{"role": "paused"})
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm)).To(Succeed())
		c := conditions.Get(mm, clusterv1.PausedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(Equal("Cluster spec.paused is set to true"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
		g.Expect(host.Spec.ConsumerRef).To(BeNil())
	}, "2s").Should(Succeed(), "a paused MetalMachine claims no host")

	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		cluster.Spec.Paused = nil
		return env.Client.Update(ctx, cluster)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mm), mm)).To(Succeed())
		g.Expect(conditions.Get(mm, clusterv1.PausedCondition)).To(HaveField("Status", metav1.ConditionFalse))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
		g.Expect(host.Spec.ConsumerRef).To(HaveField("Name", mm.Name))
	}).Should(Succeed(), "resumed, the Cluster's pause transition wakes it")
}
