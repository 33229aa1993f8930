package agent_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/api/assistedcommon"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
)

// TestUnboundAgent registers an Agent with an inventory, as the agent
// service does, in an InfraEnv without a cluster: it gets its validations,
// its installation disk (the eligible one), the six conditions with
// upstream's texts and the state annotations; approving it makes it ready,
// and an agent silent for three minutes is disconnected.
func TestUnboundAgent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	ie := newInfraEnv(g, ns, nil)
	a := register(g, ie, "5f0d7f6e-0000-4000-8000-000000000001", hostInventory("worker-0", 8))

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusKnownUnbound))
		g.Expect(a.Status.InstallationDiskID).To(Equal("/dev/disk/by-id/wwn-0x2"), "the first eligible disk")
		g.Expect(a.Status.Role).To(BeEmpty(), "no role is suggested outside a cluster")
		g.Expect(a.Status.ValidationsInfo["hardware"]).To(ContainElements(
			validation("has-inventory", "success", "Valid inventory exists for the host"),
			validation("has-min-cpu-cores", "success", "Sufficient CPU cores"),
			validation("has-min-valid-disks", "success", "Sufficient disk capacity"),
			validation("hostname-valid", "success", "Hostname worker-0 is allowed"),
		))
		g.Expect(a.Status.ValidationsInfo["network"]).To(ContainElement(validation("connected", "success", "Host is connected")))
		g.Expect(a.Status.Conditions).To(ConsistOf(
			condition("SpecSynced", corev1.ConditionTrue, "SyncOK", "The Spec has been successfully applied"),
			condition("Connected", corev1.ConditionTrue, "AgentIsConnected", "The agent's connection to the installation service is unimpaired"),
			condition("RequirementsMet", corev1.ConditionFalse, "AgentIsNotApproved", "The agent is not approved"),
			condition("Validated", corev1.ConditionTrue, "ValidationsPassing", "The agent's validations are passing"),
			condition("Installed", corev1.ConditionFalse, "InstallationNotStarted", "The installation has not yet started"),
			condition("Bound", corev1.ConditionFalse, "Unbound", "The agent is not bound to any cluster deployment"),
		))
		g.Expect(a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentStateAnnotation, hoststate.StatusKnownUnbound))
		g.Expect(a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentRoleAnnotation, "auto-assign"))
		g.Expect(a.Annotations).NotTo(HaveKey(agentinstallv1.AgentCurrentStageAnnotation))
		var inv agentinstallv1.HardwareInventory
		g.Expect(json.Unmarshal([]byte(a.Annotations[agentinstallv1.AgentInventoryAnnotation]), &inv)).To(Succeed())
		g.Expect(inv.Hostname).To(Equal("worker-0"))
		var v assistedcommon.ValidationsStatus
		g.Expect(json.Unmarshal([]byte(a.Annotations[agentinstallv1.AgentValidationsInfoAnnotation]), &v)).To(Succeed())
		g.Expect(v).To(Equal(a.Status.ValidationsInfo))
	}).Should(Succeed())

	approve(g, a)
	expectCondition(g, a, condition("RequirementsMet", corev1.ConditionTrue, "AgentIsReady", "The agent is ready to begin the installation"))

	clk.Step(agentDisconnectedAfter + time.Second)
	touch(g, a) // the reconciler looks again after the timeout in real time; a change wakes it now
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.Conditions).To(ContainElement(condition("Connected", corev1.ConditionFalse, "AgentIsDisconnected",
			"The agent has not contacted the installation service in some time, user action should be taken")))
		g.Expect(a.Status.DebugInfo.State).To(Equal(hoststate.StatusDisconnectedUnbound))
		g.Expect(a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentStateAnnotation, hoststate.StatusDisconnectedUnbound))
	}).Should(Succeed())
}

// TestBoundAgents registers three Agents of a single-node cluster: of the
// two auto-assign ones the first by name is suggested master and the other
// worker, the third keeps the worker role its spec sets and installs to the
// disk its spec names; they are bound and report the cluster validations.
func TestBoundAgents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, g, ns, "sno")
	ie := newInfraEnv(g, ns, &agentinstallv1.ClusterReference{Namespace: ns, Name: "sno"})
	first := register(g, ie, "1a000000-0000-4000-8000-000000000001", hostInventory("master-0", 8))
	second := register(g, ie, "2b000000-0000-4000-8000-000000000002", hostInventory("worker-0", 8))
	third := register(g, ie, "3c000000-0000-4000-8000-000000000003", hostInventory("worker-1", 8), func(a *agentinstallv1.Agent) {
		a.Spec.Role, a.Spec.InstallationDiskPath = agentinstallv1.HostRoleWorker, "/dev/sda"
	})

	for _, tt := range []struct {
		a          *agentinstallv1.Agent
		role, disk string
	}{
		{first, "master", "/dev/disk/by-id/wwn-0x2"},
		{second, "worker", "/dev/disk/by-id/wwn-0x2"},
		{third, "worker", "/dev/disk/by-id/wwn-0x1"},
	} {
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tt.a), tt.a)).To(Succeed())
			g.Expect(string(tt.a.Status.Role)).To(Equal(tt.role), tt.a.Name)
			g.Expect(tt.a.Status.InstallationDiskID).To(Equal(tt.disk), tt.a.Name)
			g.Expect(tt.a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentRoleAnnotation, tt.role))
			g.Expect(tt.a.Annotations).To(HaveKeyWithValue(agentinstallv1.AgentStateAnnotation, tt.a.Status.DebugInfo.State))
			g.Expect(tt.a.Status.Conditions).To(ContainElement(condition("Bound", corev1.ConditionTrue, "Bound", "The agent is bound to a cluster deployment")))
			g.Expect(tt.a.Status.ValidationsInfo["hardware"]).To(ContainElement(
				validation("hostname-unique", "success", "Hostname "+tt.a.Status.Inventory.Hostname+" is unique in cluster")))
			g.Expect(tt.a.Status.ValidationsInfo["network"]).To(ContainElement(
				validation("machine-cidr-defined", "success", "No Machine Network CIDR needed: User Managed Networking")))
			g.Expect(tt.a.Status.ValidationsInfo).To(HaveKey("operators"))
		}).Should(Succeed())
	}
}

// agentDisconnectedAfter is the reconciler's default timeout.
const agentDisconnectedAfter = 3 * time.Minute

// hostInventory is a host with cores CPUs, 32 GiB, a disk too small to
// install to and an eligible one, and a NIC.
func hostInventory(hostname string, cores int64) agentinstallv1.HardwareInventory {
	return agentinstallv1.HardwareInventory{
		Hostname: hostname,
		Cpu:      agentinstallv1.HostCPU{Count: cores, Architecture: "x86_64"},
		Memory:   agentinstallv1.HostMemory{PhysicalBytes: 32 << 30, UsableBytes: 32 << 30},
		Disks: []agentinstallv1.HostDisk{
			{ID: "/dev/disk/by-id/wwn-0x1", Name: "sda", Path: "/dev/sda", DriveType: "HDD", SizeBytes: 10 << 30,
				InstallationEligibility: agentinstallv1.HostInstallationEligibility{NotEligibleReasons: []string{"Disk is too small (disk only has 11 GB, but 20 GB are required)"}}},
			{ID: "/dev/disk/by-id/wwn-0x2", Name: "sdb", Path: "/dev/sdb", DriveType: "SSD", SizeBytes: 200 << 30,
				InstallationEligibility: agentinstallv1.HostInstallationEligibility{Eligible: true}},
		},
		Interfaces: []agentinstallv1.HostInterface{{Name: "eth0", MacAddress: "52:54:00:00:00:01", IPV4Addresses: []string{"192.168.111.20/24"}, HasCarrier: true}},
	}
}

func newInfraEnv(g Gomega, ns string, cluster *agentinstallv1.ClusterReference) *agentinstallv1.InfraEnv {
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lab"},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: cluster}}
	g.Expect(env.Client.Create(context.Background(), ie)).To(Succeed())
	return ie
}

// newCluster makes a single-node install: its ClusterImageSet, ClusterDeployment
// and AgentClusterInstall (user-managed networking).
func newCluster(t *testing.T, g Gomega, ns, name string) {
	ctx := context.Background()
	imageSet := &hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}}
	g.Expect(env.Client.Create(ctx, imageSet)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), imageSet) })
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	g.Expect(env.Client.Create(ctx, &hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{
		ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
		ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
			Kind: "AgentClusterInstall", Name: name},
		Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
	}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &hiveextv1.AgentClusterInstall{ObjectMeta: meta, Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef:          &hivev1.ClusterImageSetReference{Name: imageSet.Name},
		ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
		Networking: hiveextv1.Networking{UserManagedNetworking: ptr.To(true),
			ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}, ServiceNetwork: []string{"172.30.0.0/16"}},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 1},
	}})).To(Succeed())
}

// register creates an Agent as the agent service's registration does
// (assisted/server/hosts.go: the InfraEnv's label and ownership, auto-assign,
// bound when the InfraEnv has a cluster, a first contact now) and records
// its inventory as the inventory step does.
func register(g Gomega, ie *agentinstallv1.InfraEnv, id string, inv agentinstallv1.HardwareInventory, edits ...func(*agentinstallv1.Agent)) *agentinstallv1.Agent {
	ctx := context.Background()
	a := &agentinstallv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ie.Namespace, Name: id, Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: ie.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: agentinstallv1.GroupVersion.String(), Kind: "InfraEnv", Name: ie.Name, UID: ie.UID}}},
		Spec: agentinstallv1.AgentSpec{Role: agentinstallv1.HostRoleAutoAssign},
	}
	if ref := ie.Spec.ClusterRef; ref != nil {
		a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Namespace: ref.Namespace, Name: ref.Name}
	}
	for _, edit := range edits {
		edit(a)
	}
	// As the agent service records a registration: its annotations, then
	// the inventory reported, in the status fields it owns.
	record.SetRegistered(a, clk.Now())
	record.SetLastContact(a, clk.Now())
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		now := metav1.NewTime(clk.Now())
		inv.ReportTime = &now
		a.Status.Inventory = inv
		return env.Client.Status().Update(ctx, a)
	}).Should(Succeed())
	return a
}

func approve(g Gomega, a *agentinstallv1.Agent) {
	update(g, a, func(a *agentinstallv1.Agent) { a.Spec.Approved = true })
}

func touch(g Gomega, a *agentinstallv1.Agent) {
	update(g, a, func(a *agentinstallv1.Agent) { a.Labels["touched"] = clk.Now().Format("150405") })
}

func update(g Gomega, a *agentinstallv1.Agent, edit func(*agentinstallv1.Agent)) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		edit(a)
		return env.Client.Update(ctx, a)
	}).Should(Succeed())
}

func expectCondition(g Gomega, a *agentinstallv1.Agent, want types.GomegaMatcher) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.Conditions).To(ContainElement(want))
	}).Should(Succeed())
}

func condition(typ string, status corev1.ConditionStatus, reason, msg string) types.GomegaMatcher {
	return And(HaveField("Type", agentinstallv1.ConditionType(typ)), HaveField("Status", status), HaveField("Reason", reason), HaveField("Message", msg))
}

func validation(id, status, msg string) types.GomegaMatcher {
	return And(HaveField("ID", id), HaveField("Status", status), HaveField("Message", msg))
}
