package webhooks

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
)

func TestDefaultUserManagedNetworking(t *testing.T) {
	tests := []struct {
		platform         hiveextv1.PlatformType
		masters, workers int
		want, ok         bool // ok false: no default
	}{
		{"", 1, 0, true, true},
		{"", 3, 0, false, true},
		{"", 3, 2, false, true},
		{"", 1, 1, false, true}, // one master with workers is not a single node
		{hiveextv1.NonePlatformType, 1, 0, true, true},
		{hiveextv1.NonePlatformType, 3, 2, true, true},
		{hiveextv1.BareMetalPlatformType, 3, 0, false, true},
		{hiveextv1.BareMetalPlatformType, 2, 0, false, true},
		{hiveextv1.BareMetalPlatformType, 1, 0, false, false},
		{hiveextv1.ExternalPlatformType, 1, 0, true, true},
		{hiveextv1.ExternalPlatformType, 3, 0, true, true},
		{hiveextv1.ExternalPlatformType, 0, 0, false, false},
		{hiveextv1.VSpherePlatformType, 1, 0, true, true},
		{hiveextv1.VSpherePlatformType, 3, 0, false, false},
		{hiveextv1.NutanixPlatformType, 1, 0, true, true},
		{hiveextv1.NutanixPlatformType, 3, 2, false, false},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		spec := &hiveextv1.AgentClusterInstallSpec{PlatformType: tt.platform,
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: tt.masters, WorkerAgents: tt.workers}}
		umn, ok := DefaultUserManagedNetworking(spec)
		g.Expect([]bool{umn, ok}).To(Equal([]bool{tt.want, tt.ok}), "platform %q, %d masters, %d workers", tt.platform, tt.masters, tt.workers)
	}
}

// aci is a three-node install in state.
func aci(state string) *hiveextv1.AgentClusterInstall {
	return &hiveextv1.AgentClusterInstall{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "a"},
		Spec: hiveextv1.AgentClusterInstallSpec{
			ImageSetRef:           &hivev1.ClusterImageSetReference{Name: "openshift-v4.20.0"},
			ClusterDeploymentRef:  corev1.LocalObjectReference{Name: "c"},
			ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3},
			SSHPublicKey:          "ssh-ed25519 AAAA a",
		},
		Status: hiveextv1.AgentClusterInstallStatus{DebugInfo: hiveextv1.DebugInfo{State: state}},
	}
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		edit func(*hiveextv1.AgentClusterInstall)
		want *bool
	}{
		{name: "multi-node", edit: func(*hiveextv1.AgentClusterInstall) {}, want: ptr.To(false)},
		{name: "single node", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.ControlPlaneAgents = 1 }, want: ptr.To(true)},
		{name: "platform None", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.PlatformType = hiveextv1.NonePlatformType }, want: ptr.To(true)},
		{name: "set is kept", edit: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.PlatformType, a.Spec.Networking.UserManagedNetworking = hiveextv1.NonePlatformType, ptr.To(false)
		}, want: ptr.To(false)},
		{name: "no default upstream", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.PlatformType = hiveextv1.VSpherePlatformType }},
		{name: "install started", edit: func(a *hiveextv1.AgentClusterInstall) { a.Status.DebugInfo.State = "installing" }},
		{name: "being deleted", edit: func(a *hiveextv1.AgentClusterInstall) { a.DeletionTimestamp = ptr.To(metav1.Now()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := aci("ready")
			tt.edit(a)
			g.Expect((&AgentClusterInstall{}).Default(context.Background(), a)).To(Succeed())
			g.Expect(a.Spec.Networking.UserManagedNetworking).To(Equal(tt.want))
		})
	}
}

func TestValidateAgentClusterInstall(t *testing.T) {
	const frozen = "Attempted to change AgentClusterInstall.Spec which is immutable after install started, except for ClusterMetadata,IgnitionEndpoint fields. Unsupported change: \n"
	tests := []struct {
		name     string
		state    string
		edit     func(*hiveextv1.AgentClusterInstall)
		want     string // the whole message, empty for none
		conflict bool   // 409 rather than 400
	}{
		{name: "unchanged", state: "installing", edit: func(*hiveextv1.AgentClusterInstall) {}},
		{name: "imageSetRef changed", state: "ready", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ImageSetRef.Name = "openshift-v4.21.0" },
			want: "Attempted to change AgentClusterInstall.ImageSetRef which is immutable"},
		{name: "imageSetRef removed", state: "ready", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ImageSetRef = nil },
			want: "Attempted to change AgentClusterInstall.ImageSetRef which is immutable"},
		{name: "SNO without UMN", state: "ready", edit: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.ProvisionRequirements.ControlPlaneAgents, a.Spec.Networking.UserManagedNetworking = 1, ptr.To(false)
		}, want: "UserManagedNetworking must be set to true with SNO", conflict: true},
		{name: "SNO with UMN", state: "ready", edit: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.ProvisionRequirements.ControlPlaneAgents, a.Spec.Networking.UserManagedNetworking = 1, ptr.To(true)
		}},
		{name: "spec before install", state: "ready", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.SSHPublicKey = "ssh-ed25519 BBBB b" }},
		{name: "spec while installing", state: "installing", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.SSHPublicKey = "ssh-ed25519 BBBB b" },
			want: frozen + "\tspec.sshPublicKey: (\"ssh-ed25519 AAAA a\" => \"ssh-ed25519 BBBB b\")"},
		{name: "two fields once installed", state: "installed", edit: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.HoldInstallation, a.Spec.APIVIPs = true, []string{"10.0.0.5"}
		}, want: frozen + "\tspec.apiVIPs: (null => [\"10.0.0.5\"])\n\tspec.holdInstallation: (false => true)"},
		{name: "clusterMetadata once installed", state: "installed", edit: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.ClusterMetadata = &hivev1.ClusterMetadata{ClusterID: "id", InfraID: "infra"}
		}},
		{name: "ignitionEndpoint while installing", state: "preparing-for-installation", edit: func(a *hiveextv1.AgentClusterInstall) {
			a.Spec.IgnitionEndpoint = &hiveextv1.IgnitionEndpoint{URL: "https://ignition.example.com"}
		}},
		{name: "provisionRequirements while installing", state: "finalizing", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 },
			want: frozen + "\tspec.provisionRequirements: ({\"controlPlaneAgents\":3} => {\"controlPlaneAgents\":3,\"workerAgents\":2})"},
		{name: "provisionRequirements once installed", state: "installed", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 }},
		{name: "provisionRequirements once failed", state: "error", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 }},
		{name: "provisionRequirements adding hosts", state: "adding-hosts", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.ProvisionRequirements.WorkerAgents = 2 }},
		{name: "empty list for none", state: "installing", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.NTPSources = []string{} }},
		{name: "spec once cancelled", state: "cancelled", edit: func(a *hiveextv1.AgentClusterInstall) { a.Spec.SSHPublicKey = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := aci(tt.state)
			a := old.DeepCopy()
			tt.edit(a)
			_, err := (&AgentClusterInstall{}).ValidateUpdate(context.Background(), old, a)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.want))
			g.Expect(apierrors.IsConflict(err)).To(Equal(tt.conflict), "%v", err)
			g.Expect(apierrors.IsBadRequest(err)).To(Equal(!tt.conflict), "%v", err)
		})
	}
}

func TestValidateAgentClusterInstallCreate(t *testing.T) {
	g := NewWithT(t)
	w := &AgentClusterInstall{}
	a := aci("")
	a.Spec.ProvisionRequirements.ControlPlaneAgents = 1
	_, err := w.ValidateCreate(context.Background(), a)
	g.Expect(err).NotTo(HaveOccurred(), "unset is defaulted")
	a.Spec.Networking.UserManagedNetworking = ptr.To(false)
	_, err = w.ValidateCreate(context.Background(), a)
	g.Expect(err).To(MatchError("UserManagedNetworking must be set to true with SNO"))
	g.Expect(apierrors.IsConflict(err)).To(BeTrue())
	a.Spec.ProvisionRequirements.WorkerAgents = 2
	_, err = w.ValidateCreate(context.Background(), a)
	g.Expect(err).NotTo(HaveOccurred(), "one master and workers is not a single node")
	_, err = w.ValidateDelete(context.Background(), a)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestValidateACINamespaces(t *testing.T) {
	const ca = `spec.ignitionEndpoint.caCertificateReference.namespace: "b" is another namespace: a reference must stay in the AgentClusterInstall's namespace "a"`
	withCA := func(ns string) *hiveextv1.AgentClusterInstall {
		a := aci("installed")
		a.Spec.IgnitionEndpoint = &hiveextv1.IgnitionEndpoint{URL: "https://ignition", CaCertificateReference: &hiveextv1.CaCertificateReference{Name: "ca", Namespace: ns}}
		return a
	}
	g := NewWithT(t)
	w := &AgentClusterInstall{}
	_, err := w.ValidateCreate(context.Background(), withCA("b"))
	g.Expect(err).To(MatchError(ca))
	g.Expect(apierrors.IsBadRequest(err)).To(BeTrue())
	_, err = w.ValidateCreate(context.Background(), withCA("a"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = w.ValidateUpdate(context.Background(), withCA("a"), withCA("b"))
	g.Expect(err).To(MatchError(ca), "the ignition endpoint may change once installed, not to another namespace")
	mirror := aci("")
	mirror.Spec.MirrorRegistryRef = &hiveextv1.MirrorRegistryConfigMapReference{Name: "m", Namespace: "b"}
	_, err = w.ValidateCreate(context.Background(), mirror)
	g.Expect(err).To(MatchError(`spec.mirrorRegistryRef.namespace: "b" is another namespace: a reference must stay in the AgentClusterInstall's namespace "a"`))
}
