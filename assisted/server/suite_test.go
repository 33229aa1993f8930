package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/installstate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/server"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// cached reads through the manager's cache, as the server does.
	cached client.Client
	// base is the server's URL.
	base string
	key  = []byte("agent-service-test-signing-key-32")
)

// maxAgents is the suite's cap on Agents per InfraEnv.
const maxAgents = 4

// TestMain starts envtest and the agent service's server alone: no
// controller writes an Agent's status, so the tests set the states the
// service decides on.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Components: []component.Component{{Name: "agent-service-server", Setup: func(ctx context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			idx := mgr.GetFieldIndexer()
			if err := idx.IndexField(ctx, &agentinstallv1.InfraEnv{}, server.UIDIndex, server.IndexUID); err != nil {
				return err
			}
			if err := idx.IndexField(ctx, &hiveextv1.AgentClusterInstall{}, server.UIDIndex, server.IndexUID); err != nil {
				return err
			}
			if err := idx.IndexField(ctx, &agentinstallv1.Agent{}, record.ClusterDeploymentIndex, record.IndexClusterDeployment); err != nil {
				return err
			}
			var handler http.Handler
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
			go func() { <-ctx.Done(); ts.Close() }()
			//nolint:staticcheck // core/v1 Events, as the hub's recorder (assisted.Setup)
			recorder := mgr.GetEventRecorderFor("agent-service-test")
			srv, err := server.New(server.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Key: key, BaseURL: ts.URL,
				PollInterval: 1, Recorder: recorder, MaxAgentsPerInfraEnv: maxAgents})
			if err != nil {
				return err
			}
			handler, cached, base = srv.Handler(), mgr.GetClient(), ts.URL
			return nil
		}}},
	}))
}

// install is a three-master install whose state is made (as the
// AgentClusterInstall controller makes it when the install starts), and
// its InfraEnv.
type install struct {
	ns  string
	aci *hiveextv1.AgentClusterInstall
	ie  *agentinstallv1.InfraEnv
}

// newInstall makes an install in a namespace of its own.
func newInstall(t *testing.T, g Gomega) *install {
	ctx := context.Background()
	ns := env.Namespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-secret"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`)}})).To(Succeed())
	imageSet := &hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{GenerateName: "openshift-v4.16.3-"},
		Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}}
	g.Expect(env.Client.Create(ctx, imageSet)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), imageSet) })
	const name = "mycluster"
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	cd := &hivev1.ClusterDeployment{ObjectMeta: meta, Spec: hivev1.ClusterDeploymentSpec{
		ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
		ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
			Kind: "AgentClusterInstall", Name: name},
		Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
	}}
	g.Expect(env.Client.Create(ctx, cd)).To(Succeed())
	aci := &hiveextv1.AgentClusterInstall{ObjectMeta: meta, Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef:          &hivev1.ClusterImageSetReference{Name: imageSet.Name},
		ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
		APIVIPs:              []string{"192.168.111.5"}, IngressVIPs: []string{"192.168.111.4"},
		Networking: hiveextv1.Networking{NetworkType: "OVNKubernetes",
			ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}, ServiceNetwork: []string{"172.30.0.0/16"},
			MachineNetwork: []hiveextv1.MachineNetworkEntry{{CIDR: "192.168.111.0/24"}}},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: 3},
		SSHPublicKey:          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFirstKeyFirstKeyFirstKeyFirstKeyFirstKey00 user",
	}}
	g.Expect(env.Client.Create(ctx, aci)).To(Succeed())
	st, err := installstate.New(installstate.Inputs{CD: cd, ACI: aci, Version: "4.16.3"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: record.InstallStateName(aci)},
		Data: st.Data()})).To(Succeed())
	in := &install{ns: ns, aci: aci, ie: newInfraEnv(g, ns, "myinfraenv", &agentinstallv1.ClusterReference{Namespace: ns, Name: name})}
	seen(g, aci)
	return in
}

// newInfraEnv makes an InfraEnv, bound to ref when not nil, and waits
// until the server sees it.
func newInfraEnv(g Gomega, ns, name string, ref *agentinstallv1.ClusterReference) *agentinstallv1.InfraEnv {
	ie := &agentinstallv1.InfraEnv{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentinstallv1.InfraEnvSpec{PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, ClusterRef: ref}}
	g.Expect(env.Client.Create(context.Background(), ie)).To(Succeed())
	seen(g, ie)
	return ie
}

// seen waits until the server's cache holds o at its resource version or
// a later one.
func seen(g Gomega, o client.Object) {
	g.Eventually(func(g Gomega) {
		c := o.DeepCopyObject().(client.Object)
		g.Expect(cached.Get(context.Background(), client.ObjectKeyFromObject(o), c)).To(Succeed())
		g.Expect(atLeast(c.GetResourceVersion(), o.GetResourceVersion())).To(BeTrue())
	}).Should(Succeed())
}

// atLeast compares resource versions as the numbers the API server makes
// them (tests only).
func atLeast(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a >= b
}

// answer is a response of the server.
type answer struct {
	code   int
	body   string
	header http.Header
}

// call sends a request; headers are name, value pairs.
func call(g Gomega, method, path string, body []byte, headers ...string) answer {
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return answer{code: resp.StatusCode, body: string(data), header: resp.Header}
}

func jsonBody(g Gomega, v any) []byte {
	data, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return data
}

// infraEnvKey is the X-Secret-Key of ie's image.
func infraEnvKey(ie *agentinstallv1.InfraEnv) string {
	return assistedapi.SignAgentToken(key, string(ie.UID))
}

// register registers hostID from ie's image with headers (name, value
// pairs) besides the InfraEnv's key.
func register(g Gomega, ie *agentinstallv1.InfraEnv, hostID string, headers ...string) answer {
	return call(g, http.MethodPost, assistedapi.Path(assistedapi.RegisterPath, ie.UID),
		jsonBody(g, assistedapi.HostCreateParams{HostID: hostID}), append([]string{assistedapi.AuthHeader, infraEnvKey(ie)}, headers...)...)
}

// newHost registers hostID and returns its credential.
func newHost(g Gomega, ie *agentinstallv1.InfraEnv, hostID string) string {
	a := register(g, ie, hostID)
	g.Expect(a.code).To(Equal(http.StatusCreated), a.body)
	cred := a.header.Get(assistedapi.HostKeyHeader)
	g.Expect(cred).NotTo(BeEmpty())
	seen(g, agent(g, ie.Namespace, hostID))
	return cred
}

// agent reads an Agent from the API.
func agent(g Gomega, ns, name string) *agentinstallv1.Agent {
	a := &agentinstallv1.Agent{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a)).To(Succeed())
	return a
}

// setStatus changes an Agent's status as the agent controller would —
// the state it sets has applied the agent's last registration — and waits
// until the server sees it.
func setStatus(g Gomega, ns, name string, change func(*agentinstallv1.Agent)) {
	ctx := context.Background()
	a := agent(g, ns, name)
	before := a.DeepCopy()
	change(a)
	g.Expect(env.Client.Status().Patch(ctx, a, client.MergeFrom(before))).To(Succeed())
	if r := record.PendingRegistration(a); r != "" {
		before := a.DeepCopy()
		a.Annotations[record.RegistrationAppliedAnnotation] = r
		g.Expect(env.Client.Patch(ctx, a, client.MergeFrom(before))).To(Succeed())
	}
	seen(g, a)
}

// setState sets an Agent's state and stage.
func setState(g Gomega, ns, name, state string, stage assistedapi.HostStage) {
	setStatus(g, ns, name, func(a *agentinstallv1.Agent) {
		a.Status.DebugInfo.State, a.Status.Progress.CurrentStage = state, string(stage)
	})
}

// events are the reasons and messages of the Events about o.
func events(g Gomega, o client.Object) []string {
	l := &corev1.EventList{}
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(o.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.UID == o.GetUID() {
			out = append(out, fmt.Sprintf("%s %s: %s (x%d)", e.Type, e.Reason, e.Message, max(e.Count, 1)))
		}
	}
	return out
}
