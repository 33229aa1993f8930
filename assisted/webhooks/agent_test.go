package webhooks

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

func TestValidateAgent(t *testing.T) {
	const (
		disk      = "Either InstallationDiskID or InstallationDiskPath can be set, not both."
		immutable = "Attempted to change Spec.ClusterDeploymentName which is immutable during Agent installation."
		elsewhere = `spec.clusterDeploymentName.namespace: "b" is another namespace: a reference must stay in the Agent's namespace "a"`
	)
	cd := func(name string) *agentinstallv1.ClusterReference {
		return &agentinstallv1.ClusterReference{Name: name, Namespace: "a"}
	}
	other := func(name string) *agentinstallv1.ClusterReference {
		return &agentinstallv1.ClusterReference{Name: name, Namespace: "b"}
	}
	tests := []struct {
		name        string
		state, kind string
		old, new    *agentinstallv1.ClusterReference
		id, path    string
		want        string
	}{
		{name: "disk by id", state: "known", old: cd("c"), new: cd("c"), id: "/dev/disk/by-id/wwn-0x5000"},
		{name: "disk by path", state: "known", old: cd("c"), new: cd("c"), path: "/dev/sda"},
		{name: "disk both ways", state: "known", old: cd("c"), new: cd("c"), id: "/dev/disk/by-id/wwn-0x5000", path: "/dev/sda", want: disk},
		{name: "bound before install", state: "known-unbound", new: cd("c")},
		{name: "moved before install", state: "known", old: cd("c"), new: cd("d")},
		{name: "unbound once installed", state: "installed", old: cd("c")},
		{name: "unbound while installing", state: "installing-in-progress", old: cd("c"), want: immutable},
		{name: "moved while preparing", state: "preparing-for-installation", old: cd("c"), new: cd("d"), want: immutable},
		{name: "moved once preparing failed", state: "preparing-failed", old: cd("c"), new: cd("d"), want: immutable},
		{name: "unbound pending user action", state: "installing-pending-user-action", old: cd("c"), want: immutable},
		{name: "day-2 unbound while installing", state: "installing", kind: "AddToExistingClusterHost", old: cd("c")},
		{name: "day-2 moved while installing", state: "installing", kind: "AddToExistingClusterHost", old: cd("c"), new: cd("d"), want: immutable},
		{name: "same while installing", state: "installing", old: cd("c"), new: cd("c")},
		{name: "bound to another namespace", state: "known-unbound", new: other("c"), want: elsewhere},
		{name: "moved to another namespace", state: "known", old: cd("c"), new: other("c"), want: elsewhere},
		{name: "no namespace is the Agent's", state: "known-unbound", new: &agentinstallv1.ClusterReference{Name: "c"}},
		// Written before the webhook ran: other changes go through (the
		// controllers follow the reference nowhere); create refuses it.
		{name: "another namespace already there", state: "known", old: other("c"), new: other("c"), path: "/dev/sda", want: elsewhere + " (create)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: agentinstallv1.AgentSpec{ClusterDeploymentName: tt.old},
				Status: agentinstallv1.AgentStatus{Kind: tt.kind, DebugInfo: agentinstallv1.DebugInfo{State: tt.state}}}
			a := old.DeepCopy()
			a.Spec.ClusterDeploymentName, a.Spec.InstallationDiskID, a.Spec.InstallationDiskPath = tt.new, tt.id, tt.path
			_, err := (&Agent{}).ValidateUpdate(context.Background(), old, a)
			onCreate, createOnly := strings.CutSuffix(tt.want, " (create)")
			if tt.want == "" || createOnly {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tt.want))
				g.Expect(apierrors.IsBadRequest(err)).To(BeTrue())
			}
			_, err = (&Agent{}).ValidateCreate(context.Background(), a)
			if tt.want == disk || onCreate == elsewhere {
				g.Expect(err).To(MatchError(onCreate))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}
