package console

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/api/assistedcommon"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

func TestClusterProgress(t *testing.T) {
	replicas := func(ready, desired int32) *clusterv1.ClusterControlPlaneStatus {
		return &clusterv1.ClusterControlPlaneStatus{ReadyReplicas: ptr.To(ready), DesiredReplicas: ptr.To(desired)}
	}
	tests := []struct {
		name  string
		phase clusterv1.ClusterPhase
		cp    *clusterv1.ClusterControlPlaneStatus
		w     *clusterv1.WorkersStatus
		want  int
	}{
		{name: "pending", phase: clusterv1.ClusterPhasePending, want: 0},
		{name: "provisioning", phase: clusterv1.ClusterPhaseProvisioning, want: 20},
		{name: "provisioned, no machines counted", phase: clusterv1.ClusterPhaseProvisioned, want: 40},
		{name: "one of three masters", phase: clusterv1.ClusterPhaseProvisioned, cp: replicas(1, 3), want: 60},
		{name: "masters and workers ready", phase: clusterv1.ClusterPhaseProvisioned, cp: replicas(3, 3),
			w: &clusterv1.WorkersStatus{ReadyReplicas: ptr.To[int32](2), DesiredReplicas: ptr.To[int32](2)}, want: 100},
		{name: "more ready than desired (scaling down)", phase: clusterv1.ClusterPhaseProvisioned, cp: replicas(4, 3), want: 100},
		{name: "deleting", phase: clusterv1.ClusterPhaseDeleting, want: -1},
		{name: "unknown", phase: "", want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(clusterProgress(string(tt.phase), tt.cp, tt.w)).To(Equal(tt.want))
		})
	}
}

func TestRows(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "x"}
	failed := &hiveextv1.AgentClusterInstall{ObjectMeta: meta}
	failed.Status.Conditions = []hivev1.ClusterInstallCondition{
		{Type: "SpecSynced", Status: corev1.ConditionTrue},
		{Type: "Failed", Status: corev1.ConditionTrue, Reason: "InstallationFailed", Message: "disk too small"},
	}
	failed.Status.Progress.TotalPercentage = 42
	cluster := &clusterv1.Cluster{ObjectMeta: meta}
	cluster.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
	cluster.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{ReadyReplicas: ptr.To[int32](1), DesiredReplicas: ptr.To[int32](3),
		Versions: []clusterv1.StatusVersion{{Version: "v1.33.0"}}}
	cluster.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneAvailableCondition, Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "1 of 3 ready"}}
	host := &metal3v1.BareMetalHost{ObjectMeta: meta, Spec: metal3v1.BareMetalHostSpec{ConsumerRef: &corev1.ObjectReference{Kind: "MetalMachine", Name: "m0"}}}
	host.Status.Provisioning.State = metal3v1.StateProvisioned
	host.Status.PoweredOn = true
	host.Status.ErrorType, host.Status.ErrorMessage = "power management error", "BMC unreachable"
	installed := &hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{Installed: true}}
	byACI := &hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Kind: "AgentClusterInstall", Name: "x"}}}

	g := NewWithT(t)
	r := aciRow(failed)
	g.Expect(r.Key).To(Equal("AgentClusterInstall/ns/x"))
	g.Expect(r.Progress).To(Equal(42))
	g.Expect(r.Failing).To(Equal("Failed (InstallationFailed): disk too small"))
	r = clusterRow(cluster)
	g.Expect(r.Progress).To(Equal(60))
	g.Expect(r.Version).To(Equal("v1.33.0"))
	g.Expect(r.Detail).To(Equal("control plane 1/3 ready"))
	g.Expect(r.Failing).To(Equal("ControlPlaneAvailable (NotAvailable): 1 of 3 ready"))
	r = hostRow(host)
	g.Expect([]string{r.State, r.Power, r.Detail, r.Failing}).To(Equal([]string{"provisioned", "on", "consumer MetalMachine m0", "power management error: BMC unreachable"}))
	g.Expect(r.Hardware).To(BeEmpty(), "not inspected")
	host.Status.HardwareDetails = &metal3v1.HardwareDetails{CPU: metal3v1.CPU{Count: 8}, RAMMebibytes: 16384,
		Storage: []metal3v1.Storage{{SizeBytes: 100 << 30}, {SizeBytes: 20 << 30}}, NIC: []metal3v1.NIC{{Name: "eth0"}}}
	g.Expect(hostRow(host).Hardware).To(Equal("8 CPUs, 16 GiB, 2 disks (120 GiB), 1 NIC"))
	r, shown := cdRow(installed)
	g.Expect(shown).To(BeTrue())
	g.Expect([]any{r.State, r.Progress}).To(Equal([]any{"Installed", 100}))
	_, shown = cdRow(byACI)
	g.Expect(shown).To(BeFalse(), "its AgentClusterInstall's row shows the cluster")
}

func TestPageRows(t *testing.T) {
	g := NewWithT(t)
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "x"}
	agent := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: "lab"}},
		Spec: agentinstallv1.AgentSpec{Hostname: "h0", Role: agentinstallv1.HostRoleMaster, ClusterDeploymentName: &agentinstallv1.ClusterReference{Namespace: "ns", Name: "sno"}}}
	agent.Status.Progress.CurrentStage, agent.Status.Progress.InstallationPercentage = "Rebooting", 70
	agent.Status.ValidationsInfo = assistedcommon.ValidationsStatus{
		"network":  {{ID: "ntp-synced", Status: "failure", Message: "clock off"}, {ID: "has-ip", Status: "success", Message: "ok"}},
		"hardware": {{ID: "has-memory", Status: "failure", Message: "8 of 16 GiB"}, {ID: "has-disk", Status: "pending", Message: "later"}}}
	r := agentRow(agent)
	g.Expect([]any{r.Host, r.Role, r.Cluster, r.InfraEnv, r.Stage, r.Progress}).To(Equal([]any{"h0", "master", "sno", "lab", "Rebooting", 70}))
	g.Expect(r.Validations).To(Equal([]string{"has-memory: 8 of 16 GiB", "ntp-synced: clock off"}), "only failures, sorted")

	m := &clusterv1.Machine{ObjectMeta: meta, Spec: clusterv1.MachineSpec{ClusterName: "c1"}}
	m.Status.Phase, m.Status.NodeRef.Name = "Running", "node-0"
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionTrue}}
	r = machineRow(m)
	g.Expect([]string{r.State, r.Cluster, r.Node, r.Ready}).To(Equal([]string{"Running", "c1", "node-0", "True"}))

	at := metav1.NewTime(time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC))
	e := &corev1.Event{ObjectMeta: meta, InvolvedObject: corev1.ObjectReference{Kind: "Agent", Name: "a"}, Type: "Warning",
		Reason: "HostStatusUpdated", Message: "to error", LastTimestamp: at}
	r = eventRow(e)
	g.Expect([]string{r.State, r.Reason, r.Involved, r.Detail, r.Time}).To(Equal([]string{"Warning", "HostStatusUpdated", "Agent/a", "to error", "2026-11-27T18:00:00Z"}))

	ie := &agentinstallv1.InfraEnv{ObjectMeta: meta}
	g.Expect(infraEnvRow(ie).State).To(Equal("Image not ready"))
	ie.Status.ISODownloadURL, ie.Status.BootArtifacts.IpxeScriptURL = "https://i/iso", "https://i/ipxe"
	r = infraEnvRow(ie)
	g.Expect([]string{r.State, r.ISO, r.IPXE}).To(Equal([]string{"Image ready", "https://i/iso", "https://i/ipxe"}))

	c := &clusterv1.Cluster{ObjectMeta: meta}
	c.Status.Conditions = []metav1.Condition{{Type: "Available", Status: metav1.ConditionFalse, Reason: "NotAvailable", Message: "waiting"}}
	g.Expect(clusterPageRow(c).Conditions).To(Equal([]string{"Available=False (NotAvailable): waiting"}))
}
