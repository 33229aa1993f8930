package assisted_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclassification"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclusterinstall"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
	"github.com/metalshift/metalshift/assisted/reconcilers/clusterdeployment"
	"github.com/metalshift/metalshift/assisted/reconcilers/infraenv"
	"github.com/metalshift/metalshift/assisted/reconcilers/preprovisioningimage"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/shard"
	"github.com/metalshift/metalshift/internal/testenv"
)

var shardKey = []byte("shard-test-signing-key-of-32-bytes")

// shardCaches are the caches of the managers startShard started, by value.
var shardCaches = map[string]client.Reader{}

// startShard starts a manager of the agent-install component (controllers
// and agent service) with watch-filter value on the test's API server,
// stopped when the test ends, and returns its agent service's URL.
func startShard(t *testing.T, value string) string {
	t.Helper()
	ln := testenv.Listen(t)
	c := assisted.Component()
	c.Flags, c.Complete = nil, nil
	c.Setup = func(ctx context.Context, hub *component.Hub) error {
		return assisted.Setup(ctx, hub, assisted.Options{Listener: ln})
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := component.NewManager(ctx, env.Config, "shard-"+value,
		component.Options{WatchFilterValue: value, SigningKey: shardKey, RestartableInProcess: true}, []component.Component{c})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	shardCaches[value] = mgr.GetCache()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager of shard %s: %v", value, err)
		}
	})
	return "http://" + ln.Addr().String()
}

func inShard(value string) map[string]string {
	if value == "" {
		return nil
	}
	return map[string]string{shard.Label: value}
}

// TestShards: two agent-install managers with --watch-filter a and b on
// one hub split the objects by their label. Each InfraEnv, Agent and
// AgentClusterInstall is reconciled by its shard's manager (the URLs it
// is given are that manager's agent service's), each agent service
// answers for its shard's InfraEnvs only (another shard's, and an
// unlabelled one, are not found), an Agent registered at a shard's service
// carries its InfraEnv's label, and objects without the label are left
// alone by both (no finalizer, no status).
func TestShards(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := env.Namespace(t)
	urls := map[string]string{"a": startShard(t, "a"), "b": startShard(t, "b")}
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`)}})).To(Succeed())

	// The unlabelled objects first: both managers see them before the others.
	ies, acis := map[string]*agentinstallv1.InfraEnv{}, map[string]*hiveextv1.AgentClusterInstall{}
	for _, v := range []string{"", "a", "b"} {
		name := "shard-" + v
		if v == "" {
			name = "unlabelled"
		}
		cd := &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: inShard(v)}, Spec: hivev1.ClusterDeploymentSpec{
			ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
				Kind: "AgentClusterInstall", Name: name},
		}}
		g.Expect(env.Client.Create(ctx, cd)).To(Succeed())
		aci := newACI(name, ns)
		aci.Labels = inShard(v)
		g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
		ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: inShard(v)},
			Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
				ClusterRef: &agentinstallv1.ClusterReference{Namespace: ns, Name: name}}}
		g.Expect(env.Client.Create(ctx, ie)).To(Succeed())
		ies[v], acis[v] = ie, aci
	}

	for _, v := range []string{"a", "b"} {
		ie, aci := ies[v], acis[v]
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ie), ie)).To(Succeed())
			g.Expect(ie.Status.ISODownloadURL).To(HavePrefix(urls[v]+"/"), "shard %s's InfraEnv has its manager's image URL", v)
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(aci), aci)).To(Succeed())
			g.Expect(aci.Status.DebugInfo.EventsURL).To(HavePrefix(urls[v]+"/"), "shard %s's install has its manager's events URL", v)
		}).Should(Succeed())
	}

	// A manager's cache holds its shard's installs alone: those of the
	// other shard and the unlabelled ones are neither held nor sent to it.
	for _, v := range []string{"a", "b"} {
		for _, other := range []string{"", "a", "b"} {
			for _, o := range []client.Object{&agentinstallv1.InfraEnv{}, &hiveextv1.AgentClusterInstall{}, &hivev1.ClusterDeployment{}} {
				err := shardCaches[v].Get(ctx, client.ObjectKeyFromObject(ies[other]), o)
				if other == v {
					g.Expect(err).NotTo(HaveOccurred(), "manager %s holds its %T", v, o)
				} else {
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "manager %s does not hold shard %q's %T: %v", v, other, o, err)
				}
			}
		}
	}

	// Each service registers hosts of its shard's InfraEnv only.
	for _, v := range []string{"a", "b"} {
		for _, ieShard := range []string{"", "a", "b"} {
			code := registerAt(g, urls[v], ies[ieShard], hostID(v, ieShard))
			if ieShard == v {
				g.Expect(code).To(Equal(http.StatusCreated), "service %s registers a host of its InfraEnv", v)
			} else {
				g.Expect(code).To(Equal(http.StatusNotFound), "service %s refuses InfraEnv %q", v, ies[ieShard].Name)
			}
		}
		// Another shard's image is not found either, though its URL is signed.
		other := ies[map[string]string{"a": "b", "b": "a"}[v]]
		code, _ := testenv.Call(t, http.MethodGet, urls[v]+strings.TrimPrefix(other.Status.ISODownloadURL, urlOf(urls, other)), "", nil)
		g.Expect(code).To(Equal(http.StatusNotFound))
	}
	for _, v := range []string{"a", "b"} {
		a := &agentinstallv1.Agent{}
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: hostID(v, v)}, a)).To(Succeed())
			g.Expect(a.Labels).To(HaveKeyWithValue(shard.Label, v), "the Agent carries its InfraEnv's shard")
			g.Expect(a.Status.DebugInfo.EventsURL).To(HavePrefix(urls[v]+"/"), "shard %s's Agent is reconciled by its manager", v)
		}).Should(Succeed())
	}

	// Both managers have seen the unlabelled objects for as long as the
	// others took: neither wrote them.
	untouched := func(g Gomega) {
		ie, aci, cd := &agentinstallv1.InfraEnv{}, &hiveextv1.AgentClusterInstall{}, &hivev1.ClusterDeployment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ies[""]), ie)).To(Succeed())
		g.Expect(ie.Finalizers).To(BeEmpty())
		g.Expect(ie.Status.ISODownloadURL).To(BeEmpty())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(acis[""]), aci)).To(Succeed())
		g.Expect(aci.Finalizers).To(BeEmpty())
		g.Expect(aci.Status.DebugInfo.EventsURL).To(BeEmpty())
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "unlabelled"}, cd)).To(Succeed())
		g.Expect(cd.Finalizers).To(BeEmpty())
	}
	g.Consistently(untouched).WithTimeout(time.Second).Should(Succeed())
}

// hostID is the host registering at service's agent service from an
// InfraEnv of shard ieShard.
func hostID(service, ieShard string) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%06x%06x", service, ieShard)
}

// urlOf is the agent service URL of urls that ie's image URL starts with.
func urlOf(urls map[string]string, ie *agentinstallv1.InfraEnv) string {
	for _, u := range urls {
		if strings.HasPrefix(ie.Status.ISODownloadURL, u+"/") {
			return u
		}
	}
	return ""
}

// registerAt registers host at the agent service of base with ie's key and
// returns the status code.
func registerAt(g Gomega, base string, ie *agentinstallv1.InfraEnv, host string) int {
	body, err := json.Marshal(assistedapi.HostCreateParams{HostID: host})
	g.Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodPost, base+assistedapi.Path(assistedapi.RegisterPath, ie.UID), bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set(assistedapi.AuthHeader, assistedapi.SignAgentToken(shardKey, string(ie.UID)))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestReconcilersSkipOtherShards calls every agent-install reconciler of
// shard a on an object of shard b and on an unlabelled one, whatever
// event would have brought them (another object's, mapped to them, carries
// no label): it returns at once and writes nothing.
func TestReconcilersSkipOtherShards(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	const value = "a"
	c := env.Client
	tests := []struct {
		name string
		r    reconcile.Reconciler
		obj  func(name string) client.Object
	}{
		{"InfraEnv", &infraenv.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}}}
		}},
		{"Agent", &agent.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}},
		{"Agent labels", &agentclassification.LabelReconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &agentinstallv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: n + "-l"}}
		}},
		{"AgentClassification", &agentclassification.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &agentinstallv1.AgentClassification{ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: agentinstallv1.AgentClassificationSpec{LabelKey: "size", LabelValue: "large", Query: ".inventory.cpu.count > 4"}}
		}},
		{"ClusterDeployment", &clusterdeployment.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: hivev1.ClusterDeploymentSpec{ClusterName: n, BaseDomain: "example.com",
				ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
					Kind: "AgentClusterInstall", Name: n}}}
		}},
		{"AgentClusterInstall", &agentclusterinstall.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return newACI(n, "")
		}},
		{"BareMetalHost", &bmac.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: metal3v1.BareMetalHostSpec{
				BMC: metal3v1.BMCDetails{Address: "redfish://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"}}}
		}},
		{"PreprovisioningImage", &preprovisioningimage.Reconciler{Client: c, WatchFilterValue: value}, func(n string) client.Object {
			return &metal3v1.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}},
	}
	for _, tt := range tests {
		for _, other := range []string{"", "b"} {
			t.Run(tt.name+" of shard "+other, func(t *testing.T) {
				g := NewWithT(t)
				name := "unlabelled"
				if other != "" {
					name = "shard-" + other
				}
				obj := tt.obj(name)
				obj.SetNamespace(ns)
				obj.SetLabels(inShard(other))
				g.Expect(c.Create(ctx, obj)).To(Succeed())
				rv := obj.GetResourceVersion()
				res, err := tt.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res).To(BeZero())
				g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
				g.Expect(obj.GetResourceVersion()).To(Equal(rv), "written by shard %s's reconciler", value)
			})
		}
	}
}
