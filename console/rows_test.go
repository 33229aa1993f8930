package console

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

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
	r, shown := cdRow(installed)
	g.Expect(shown).To(BeTrue())
	g.Expect([]any{r.State, r.Progress}).To(Equal([]any{"Installed", 100}))
	_, shown = cdRow(byACI)
	g.Expect(shown).To(BeFalse(), "its AgentClusterInstall's row shows the cluster")
}
