package webhooks

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
)

// The osImageVersion added to a bound InfraEnv reads its ClusterDeployment:
// the envtest in package assisted covers it.
func TestValidateInfraEnv(t *testing.T) {
	ref := func(name string) *agentinstallv1.ClusterReference {
		return &agentinstallv1.ClusterReference{Name: name, Namespace: "a"}
	}
	const elsewhere = `spec.clusterRef.namespace: "b" is another namespace: a reference must stay in the InfraEnv's namespace "a"`
	tests := []struct {
		name     string
		old, new agentinstallv1.InfraEnvSpec // old empty: a create
		want     string
	}{
		{name: "create bound", new: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c")}},
		{name: "create unbound with a version", new: agentinstallv1.InfraEnvSpec{OSImageVersion: "4.20"}},
		{name: "create bound with a version", new: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c"), OSImageVersion: "4.20"},
			want: "Either Spec.ClusterRef or Spec.OSImageVersion should be specified (not both)."},
		{name: "clusterRef set", old: agentinstallv1.InfraEnvSpec{SSHAuthorizedKey: "k"}, new: agentinstallv1.InfraEnvSpec{SSHAuthorizedKey: "k", ClusterRef: ref("c")},
			want: "Attempted to change Spec.ClusterRef which is immutable after InfraEnv creation."},
		{name: "clusterRef changed", old: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c")}, new: agentinstallv1.InfraEnvSpec{ClusterRef: ref("d")},
			want: "Attempted to change Spec.ClusterRef which is immutable after InfraEnv creation."},
		{name: "clusterRef namespace changed", old: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c")},
			new:  agentinstallv1.InfraEnvSpec{ClusterRef: &agentinstallv1.ClusterReference{Name: "c", Namespace: "b"}},
			want: elsewhere},
		{name: "create bound elsewhere", new: agentinstallv1.InfraEnvSpec{ClusterRef: &agentinstallv1.ClusterReference{Name: "c", Namespace: "b"}},
			want: elsewhere},
		{name: "create bound without a namespace", new: agentinstallv1.InfraEnvSpec{ClusterRef: &agentinstallv1.ClusterReference{Name: "c"}}},
		{name: "create with a mirror registry elsewhere",
			new:  agentinstallv1.InfraEnvSpec{MirrorRegistryRef: &agentinstallv1.MirrorRegistryConfigMapReference{Name: "m", Namespace: "b"}},
			want: `spec.mirrorRegistryRef.namespace: "b" is another namespace: a reference must stay in the InfraEnv's namespace "a"`},
		{name: "clusterRef removed", old: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c")}, new: agentinstallv1.InfraEnvSpec{SSHAuthorizedKey: "k"},
			want: "Attempted to change Spec.ClusterRef which is immutable after InfraEnv creation."},
		{name: "cpuArchitecture changed", old: agentinstallv1.InfraEnvSpec{CpuArchitecture: "x86_64"}, new: agentinstallv1.InfraEnvSpec{CpuArchitecture: "aarch64"},
			want: "Attempted to change Spec.CpuArchitecture which is immutable after InfraEnv creation."},
		{name: "cpuArchitecture set to the default", old: agentinstallv1.InfraEnvSpec{SSHAuthorizedKey: "k"}, new: agentinstallv1.InfraEnvSpec{CpuArchitecture: "x86_64"}},
		{name: "cpuArchitecture unset from another", old: agentinstallv1.InfraEnvSpec{CpuArchitecture: "arm64"}, new: agentinstallv1.InfraEnvSpec{SSHAuthorizedKey: "k"},
			want: "Attempted to change Spec.CpuArchitecture which is immutable after InfraEnv creation."},
		{name: "other fields", old: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c"), SSHAuthorizedKey: "k"},
			new: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c"), SSHAuthorizedKey: "l", AdditionalNTPSources: []string{"ntp"}}},
		{name: "version on an unbound one", old: agentinstallv1.InfraEnvSpec{SSHAuthorizedKey: "k"}, new: agentinstallv1.InfraEnvSpec{OSImageVersion: "4.20"}},
		{name: "version kept on a bound one", old: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c"), OSImageVersion: "4.20"},
			new: agentinstallv1.InfraEnvSpec{ClusterRef: ref("c"), OSImageVersion: "4.21"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &InfraEnv{} // no Reader: none of these reads
			ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}, Spec: tt.new}
			var err error
			if tt.old.ClusterRef == nil && tt.old.SSHAuthorizedKey == "" && tt.old.CpuArchitecture == "" {
				_, err = w.ValidateCreate(context.Background(), ie)
			} else {
				_, err = w.ValidateUpdate(context.Background(), &agentinstallv1.InfraEnv{ObjectMeta: ie.ObjectMeta, Spec: tt.old}, ie)
			}
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.want))
			g.Expect(apierrors.IsBadRequest(err)).To(BeTrue())
		})
	}
}
