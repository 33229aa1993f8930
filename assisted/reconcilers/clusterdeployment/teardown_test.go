package clusterdeployment_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclusterinstall"
	"github.com/metalshift/metalshift/assisted/reconcilers/clusterdeployment"
	"github.com/metalshift/metalshift/assisted/reconcilers/infraenv"
)

// install is what a user builds for an agent-based install, in a namespace
// of its own: a ClusterDeployment my-cluster installed by the
// AgentClusterInstall my-aci, with its ClusterImageSet, the install-state
// Secret the service made, an InfraEnv made for the cluster (clusterRef)
// with one Agent, a late-binding InfraEnv (no clusterRef) with one Agent
// bound to the cluster and one free, and an NMStateConfig.
type install struct {
	cd       *hivev1.ClusterDeployment
	aci      *hiveextv1.AgentClusterInstall
	imageSet *hivev1.ClusterImageSet
	state    *corev1.Secret
	nmstate  *agentinstallv1.NMStateConfig
	// clusterIE has clusterRef my-cluster; poolIE none.
	clusterIE, poolIE *agentinstallv1.InfraEnv
	// bound registered through clusterIE; late through poolIE, then was
	// bound to my-cluster; free through poolIE, never bound.
	bound, late, free *agentinstallv1.Agent
}

// objects are all of the install's objects.
func (in *install) objects() []client.Object {
	return []client.Object{in.cd, in.aci, in.imageSet, in.state, in.nmstate, in.clusterIE, in.poolIE, in.bound, in.late, in.free}
}

func newInstall(t *testing.T, g Gomega) *install {
	ctx := context.Background()
	ns := env.Namespace(t)
	in := &install{}
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}})).To(Succeed())
	in.imageSet = &hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}}
	g.Expect(env.Client.Create(ctx, in.imageSet)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), in.imageSet) })
	in.cd = &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-cluster"}, Spec: hivev1.ClusterDeploymentSpec{
		ClusterName: "my-cluster", BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
		ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
			Kind: "AgentClusterInstall", Name: "my-aci"},
		Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
	}}
	g.Expect(env.Client.Create(ctx, in.cd)).To(Succeed())
	in.aci = &hiveextv1.AgentClusterInstall{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-aci"}, Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef:          &hivev1.ClusterImageSetReference{Name: in.imageSet.Name},
		ClusterDeploymentRef: corev1.LocalObjectReference{Name: "my-cluster"},
		Networking: hiveextv1.Networking{UserManagedNetworking: ptr.To(true),
			ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}, ServiceNetwork: []string{"172.30.0.0/16"}},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3},
	}}
	g.Expect(env.Client.Create(ctx, in.aci)).To(Succeed())
	// The install state, as the service makes it when the install starts.
	in.state = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: record.InstallStateName(in.aci),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: hiveextv1.GroupVersion.String(), Kind: "AgentClusterInstall",
			Name: in.aci.Name, UID: in.aci.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
	g.Expect(env.Client.Create(ctx, in.state)).To(Succeed())
	in.nmstate = &agentinstallv1.NMStateConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-0", Labels: map[string]string{"lab": ns}},
		Spec: agentinstallv1.NMStateConfigSpec{Interfaces: []*agentinstallv1.Interface{{Name: "eth0", MacAddress: "52:54:00:00:00:01"}}}}
	g.Expect(env.Client.Create(ctx, in.nmstate)).To(Succeed())
	in.clusterIE = newInfraEnv(g, ns, "cluster", &agentinstallv1.ClusterReference{Namespace: ns, Name: "my-cluster"})
	in.poolIE = newInfraEnv(g, ns, "pool", nil)
	in.bound = register(g, in.clusterIE, "11111111-1111-1111-1111-111111111111")
	in.late = register(g, in.poolIE, "22222222-2222-2222-2222-222222222222")
	in.free = register(g, in.poolIE, "33333333-3333-3333-3333-333333333333")
	update(g, in.late, func(a *agentinstallv1.Agent) {
		a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Namespace: ns, Name: "my-cluster"}
	})
	return in
}

func newInfraEnv(g Gomega, ns, name string, cluster *agentinstallv1.ClusterReference) *agentinstallv1.InfraEnv {
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: cluster,
			NMStateConfigLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"lab": ns}}}}
	g.Expect(env.Client.Create(context.Background(), ie)).To(Succeed())
	return ie
}

// register creates an Agent as the service's registration does: labelled
// with and owned by its InfraEnv, bound when the InfraEnv has a cluster.
func register(g Gomega, ie *agentinstallv1.InfraEnv, id string) *agentinstallv1.Agent {
	a := &agentinstallv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ie.Namespace, Name: id, Labels: map[string]string{agentinstallv1.InfraEnvNameLabel: ie.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: agentinstallv1.GroupVersion.String(), Kind: "InfraEnv", Name: ie.Name, UID: ie.UID}}},
		Spec: agentinstallv1.AgentSpec{Role: agentinstallv1.HostRoleAutoAssign},
	}
	if ref := ie.Spec.ClusterRef; ref != nil {
		a.Spec.ClusterDeploymentName = &agentinstallv1.ClusterReference{Namespace: ref.Namespace, Name: ref.Name}
	}
	g.Expect(env.Client.Create(context.Background(), a)).To(Succeed())
	return a
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

// expectFinalizers waits until the service has put its finalizer on each
// of the install's objects that has one.
func (in *install) expectFinalizers(g Gomega) {
	want := map[client.Object]string{in.cd: clusterdeployment.Finalizer, in.aci: agentclusterinstall.Finalizer,
		in.clusterIE: infraenv.Finalizer, in.poolIE: infraenv.Finalizer, in.bound: agent.Finalizer, in.late: agent.Finalizer, in.free: agent.Finalizer}
	for o, f := range want {
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)).To(Succeed())
			g.Expect(o.GetFinalizers()).To(ContainElement(f))
		}).Should(Succeed(), "%T %s gets finalizer %s", o, o.GetName(), f)
	}
}

func gone(g Gomega, o client.Object) {
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o))
	}).Should(BeTrue(), "%T %s is deleted", o, o.GetName())
}

// TestTeardown deletes each kind of the install in turn and checks what
// goes with it: a ClusterDeployment takes its AgentClusterInstall, which
// deletes the Agents of the cluster's InfraEnv and unbinds late-bound ones;
// an AgentClusterInstall does the same and leaves the ClusterDeployment;
// InfraEnvs, NMStateConfigs and ClusterImageSets take nothing.
func TestTeardown(t *testing.T) {
	startService(t)
	for _, tc := range []struct {
		name   string
		delete func(*install) client.Object
		// gone are deleted with it; unbound are Agents left unbound;
		// events are the reasons of the teardown's events.
		gone    func(*install) []client.Object
		unbound func(*install) []*agentinstallv1.Agent
		events  []string
	}{
		{
			name:    "ClusterDeployment",
			delete:  func(in *install) client.Object { return in.cd },
			gone:    func(in *install) []client.Object { return []client.Object{in.aci, in.bound, in.state} },
			unbound: func(in *install) []*agentinstallv1.Agent { return []*agentinstallv1.Agent{in.late} },
			events:  []string{"AgentClusterInstallDeleted", "Deprovisioned", "AgentDeleted", "AgentUnbound"},
		},
		{
			name:    "AgentClusterInstall",
			delete:  func(in *install) client.Object { return in.aci },
			gone:    func(in *install) []client.Object { return []client.Object{in.bound, in.state} },
			unbound: func(in *install) []*agentinstallv1.Agent { return []*agentinstallv1.Agent{in.late} },
			events:  []string{"AgentDeleted", "AgentUnbound"},
		},
		{name: "InfraEnv with a clusterRef", delete: func(in *install) client.Object { return in.clusterIE }},
		{name: "late-binding InfraEnv", delete: func(in *install) client.Object { return in.poolIE }},
		{name: "NMStateConfig", delete: func(in *install) client.Object { return in.nmstate }},
		{name: "ClusterImageSet", delete: func(in *install) client.Object { return in.imageSet }},
		{name: "free Agent", delete: func(in *install) client.Object { return in.free }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			in := newInstall(t, g)
			in.expectFinalizers(g)

			deleted := tc.delete(in)
			g.Expect(env.Client.Delete(ctx, deleted)).To(Succeed())
			gone(g, deleted)
			goneSet := map[client.Object]bool{deleted: true}
			if tc.gone != nil {
				for _, o := range tc.gone(in) {
					gone(g, o)
					goneSet[o] = true
				}
			}
			for _, a := range ptrOr(tc.unbound, in) {
				g.Eventually(func(g Gomega) {
					g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
					g.Expect(a.Spec.ClusterDeploymentName).To(BeNil())
				}).Should(Succeed(), "Agent %s is unbound", a.Name)
			}
			// The rest stays: not deleted, not deleting, Agents bound as they were.
			g.Consistently(func(g Gomega) {
				for _, o := range in.objects() {
					if goneSet[o] || ownedBy(o, deleted) {
						continue // Kubernetes' garbage collector deletes what a deleted InfraEnv owns
					}
					g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed(), "%T %s stays", o, o.GetName())
					g.Expect(o.GetDeletionTimestamp()).To(BeNil(), "%T %s stays", o, o.GetName())
				}
				if !goneSet[in.bound] {
					g.Expect(in.bound.Spec.ClusterDeploymentName).NotTo(BeNil())
				}
			}).WithTimeout(2 * time.Second).Should(Succeed())
			if len(tc.events) > 0 {
				g.Eventually(func(g Gomega) []string { return eventReasons(g, in.cd.Namespace) }).Should(ContainElements(tc.events))
			}
		})
	}
}

func ptrOr(f func(*install) []*agentinstallv1.Agent, in *install) []*agentinstallv1.Agent {
	if f == nil {
		return nil
	}
	return f(in)
}

func ownedBy(o, owner client.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

func eventReasons(g Gomega, ns string) []string {
	l := &corev1.EventList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Reason)
	}
	return out
}

// TestServiceDown deletes a ClusterDeployment, its AgentClusterInstall and
// an Agent while the agent service is down: each waits on its finalizer
// until the seed's merge patch (kubectl, as a user would) clears them.
func TestServiceDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stop := startService(t)
	in := newInstall(t, g)
	in.expectFinalizers(g)
	stop()

	waiting := []client.Object{in.cd, in.aci, in.bound}
	for _, o := range waiting {
		g.Expect(env.Client.Delete(ctx, o)).To(Succeed())
	}
	g.Consistently(func(g Gomega) {
		for _, o := range waiting {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed(), "%T %s waits", o, o.GetName())
			g.Expect(o.GetDeletionTimestamp()).NotTo(BeNil())
		}
	}).WithTimeout(2 * time.Second).Should(Succeed())

	kubeconfig := writeKubeconfig(t, g)
	for _, p := range []struct {
		resource string
		o        client.Object
	}{
		{"agentclusterinstalls.extensions.hive.openshift.io", in.aci},
		{"clusterdeployments.hive.openshift.io", in.cd},
		{"agents.agent-install.openshift.io", in.bound},
	} {
		out, err := exec.Command(kubectl(t), "--kubeconfig", kubeconfig, "-n", in.cd.Namespace,
			"patch", p.resource, p.o.GetName(), "-p", `{"metadata":{"finalizers":null}}`, "--type=merge").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "kubectl: %s", out)
		gone(g, p.o)
	}
	// Released by hand, the teardown did not run: the late-bound Agent is
	// still bound.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(in.late), in.late)).To(Succeed())
	g.Expect(in.late.Spec.ClusterDeploymentName).NotTo(BeNil())
}

// TestQuickDelete deletes objects right after creating them, before or
// while the service adds its finalizers: none is left behind.
func TestQuickDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startService(t)
	for range 5 {
		in := newInstall(t, g)
		objs := []client.Object{in.cd, in.aci, in.clusterIE, in.poolIE, in.bound, in.late, in.free}
		for _, o := range objs {
			g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, o))).To(Succeed())
		}
		for _, o := range objs {
			gone(g, o)
		}
	}
}

func kubectl(t *testing.T) string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, "kubectl"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeKubeconfig writes the environment's admin credentials for kubectl.
func writeKubeconfig(t *testing.T, g Gomega) string {
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, p)).To(Succeed())
	return p
}
