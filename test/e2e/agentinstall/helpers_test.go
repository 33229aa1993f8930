package agentinstall

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/cluster"
	"github.com/metalshift/metalshift/sim/machine"
)

// osImage serves a small raw OS image and returns its URL and sha256.
func osImage(t *testing.T) (string, string) {
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "os.raw", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s.URL + "/os.raw", hex.EncodeToString(sum[:])
}

// world starts a simulated network with n machines on subnet.
func world(t *testing.T, n int, subnet string) *sim.Lab {
	console := &testWriter{t: t}
	t.Cleanup(console.close) // runs last: machines still stopping log nowhere
	w, err := cluster.New(cluster.Options{Logf: func(format string, args ...any) {
		fmt.Fprintf(console, format, args...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return sim.NewLab(sim.LabOptions{Hosts: n, World: w, Subnet: subnet, NamePrefix: "node", AgentPollInterval: time.Second,
		Console: console, MACOctet: macOctet(subnet)})
}

// macOctet tells one test's machines from another's by their subnet (each
// test has its own): a boot MAC is unique on the hub, and the hosts of a
// finished test stay in the API.
func macOctet(subnet string) byte {
	last, err := strconv.Atoi(subnet[strings.LastIndex(subnet, ".")+1:])
	if err != nil || last <= 0 || last > 0x3f {
		panic("installtest: subnets are 127.77.<1..63>, not " + subnet)
	}
	return byte(0x40 + last)
}

// testWriter logs to the test until the test ends, and drops what comes
// later (a powered-off machine's agent may still finish a write).
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}

// bootISO does what a person does at a BMC: insert the ISO, boot from it once.
func bootISO(g *WithT, m *machine.Machine, url string) {
	g.Expect(m.InsertMedia(url)).To(Succeed())
	m.SetOverride(machine.BootOverride{Target: machine.BootCd, UEFI: true})
	m.PowerOn()
}

// install objects in the seed's shapes: a ClusterImageSet, the pull
// secret, a ClusterDeployment and its AgentClusterInstall, an InfraEnv.
// Without VIPs the cluster has user-managed networking.
func installObjects(ns, name string, masters, workers int, apiVIP, ingressVIP string) []client.Object {
	meta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n, Namespace: ns} }
	aci := &hiveextv1.AgentClusterInstall{ObjectMeta: meta(name), Spec: hiveextv1.AgentClusterInstallSpec{
		ImageSetRef:          &hivev1.ClusterImageSetReference{Name: "openshift-v4.16.3"},
		ClusterDeploymentRef: corev1.LocalObjectReference{Name: name},
		Networking: hiveextv1.Networking{
			ClusterNetwork: []hiveextv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
			ServiceNetwork: []string{"172.30.0.0/16"},
		},
		ProvisionRequirements: hiveextv1.ProvisionRequirements{ControlPlaneAgents: masters, WorkerAgents: workers},
		SSHPublicKey:          "ssh-ed25519 AAAA user@host",
	}}
	if apiVIP == "" {
		aci.Spec.Networking.UserManagedNetworking = ptr.To(true)
	} else {
		aci.Spec.APIVIPs, aci.Spec.IngressVIPs = []string{apiVIP}, []string{ingressVIP}
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: meta("pull-secret"), Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"auth":"c2ltOnNpbQ=="}}}`)}},
		&hivev1.ClusterDeployment{ObjectMeta: meta(name), Spec: hivev1.ClusterDeploymentSpec{
			ClusterName: name, BaseDomain: "example.com", PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"},
			ClusterInstallRef: &hivev1.ClusterInstallLocalReference{Group: hiveextv1.GroupVersion.Group, Version: hiveextv1.GroupVersion.Version,
				Kind: "AgentClusterInstall", Name: name},
			Platform: hivev1.Platform{AgentBareMetal: &hivev1.AgentBareMetalPlatform{}},
		}},
		aci,
		&agentinstallv1.InfraEnv{ObjectMeta: meta(name), Spec: agentinstallv1.InfraEnvSpec{
			PullSecretRef: &corev1.LocalObjectReference{Name: "pull-secret"}, SSHAuthorizedKey: "ssh-ed25519 AAAA user@host",
			ClusterRef: &agentinstallv1.ClusterReference{Name: name, Namespace: ns},
		}},
	}
}

// serviceObjects are the cluster-wide ones: the ClusterImageSet and the
// AgentServiceConfig with the OS image.
func serviceObjects(t *testing.T, g *WithT) {
	ctx := context.Background()
	url, sum := osImage(t)
	for _, o := range []client.Object{
		&hivev1.ClusterImageSet{ObjectMeta: metav1.ObjectMeta{Name: "openshift-v4.16.3"},
			Spec: hivev1.ClusterImageSetSpec{ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"}},
		&agentinstallv1.AgentServiceConfig{ObjectMeta: metav1.ObjectMeta{Name: "agent"}},
	} {
		_ = env.Client.Delete(ctx, o)
		g.Eventually(func() error { return env.Client.Create(ctx, o.DeepCopyObject().(client.Object)) }).Should(Succeed())
	}
	asc := &agentinstallv1.AgentServiceConfig{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Name: "agent"}, asc)).To(Succeed())
	asc.Spec.OSImages = []agentinstallv1.OSImage{{OpenshiftVersion: "4.16", Version: "416.94", URL: url, CPUArchitecture: "x86_64", Checksum: "sha256:" + sum}}
	g.Expect(env.Client.Update(ctx, asc)).To(Succeed())
}

// waitCompleted waits for the AgentClusterInstall's Completed condition to
// be True (a multi-node cluster goes on to adding-hosts, so the message
// varies), showing the cluster's and its hosts' states while it waits.
// awaitingApproval boots the lab's first machine from ie's discovery ISO
// and returns its Agent once the install name of ie's namespace waits for
// its approval, and for nothing else.
func awaitingApproval(g *WithT, lab *sim.Lab, ie *agentinstallv1.InfraEnv, name string) *agentinstallv1.Agent {
	ctx := context.Background()
	bootISO(g, lab.Machines[0], ie.Status.ISODownloadURL)
	agent := &agentinstallv1.Agent{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ie.Namespace, Name: lab.Machines[0].UUID}, agent)
	}).Should(Succeed())
	aci := &hiveextv1.AgentClusterInstall{}
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ie.Namespace, Name: name}, aci)
		return condMessage(aci, "RequirementsMet")
	}).Should(Equal("The installation is pending on the approval of 1 agents"))
	return agent
}

func waitCompleted(g *WithT, ns, name string) *hiveextv1.AgentClusterInstall {
	ctx := context.Background()
	aci := &hiveextv1.AgentClusterInstall{}
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, aci)
		if m := condMessage(aci, "Completed"); !condTrue(aci, "Completed") {
			agents := &agentinstallv1.AgentList{}
			_ = env.Client.List(ctx, agents, client.InNamespace(ns))
			s := fmt.Sprintf("%s (cluster %s: %s; %s", m, aci.Status.DebugInfo.State, aci.Status.DebugInfo.StateInfo, condMessage(aci, "Validated"))
			for _, a := range agents.Items {
				s += fmt.Sprintf("; host %s: %s: %s, stage %q", a.Name, a.Status.DebugInfo.State, a.Status.DebugInfo.StateInfo, a.Status.Progress.CurrentStage)
			}
			return s + ")"
		}
		return "completed"
	}).Should(Equal("completed"))
	return aci
}

// spokeNodes lists the installed cluster's Nodes with the admin kubeconfig
// the ClusterDeployment's Secret holds.
func spokeNodes(g *WithT, ns, name string) *corev1.NodeList {
	nodes := &corev1.NodeList{}
	g.Expect(spokeClient(g, ns, name).List(context.Background(), nodes)).To(Succeed())
	return nodes
}

// spokeClient is a client of the installed cluster through the admin
// kubeconfig the ClusterDeployment's Secret holds.
func spokeClient(g *WithT, ns, name string) client.Client {
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name + "-admin-kubeconfig"}, sec)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data["kubeconfig"])
	g.Expect(err).NotTo(HaveOccurred())
	spoke, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	return spoke
}

func condTrue(aci *hiveextv1.AgentClusterInstall, t string) bool {
	for _, c := range aci.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func condMessage(aci *hiveextv1.AgentClusterInstall, t string) string {
	for _, c := range aci.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// getEvents GETs an events URL, expecting code, and decodes a 200's events.
func getEvents(g *WithT, url string, code int) []assistedapi.Event {
	g.Expect(url).NotTo(BeEmpty())
	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(code))
	var events []assistedapi.Event
	if code == http.StatusOK {
		g.Expect(json.NewDecoder(resp.Body).Decode(&events)).To(Succeed())
	}
	return events
}

// start creates the service objects and a cluster's objects in the
// seed's shapes (namespace and name ns; VIPs, if given, api then ingress),
// and n machines on subnet; it returns the machines and the InfraEnv once
// its ISO URL is there.
func start(t *testing.T, g *WithT, ns string, masters, workers int, subnet string, vips ...string) (*sim.Lab, *agentinstallv1.InfraEnv) {
	return startSpare(t, g, ns, masters, workers, 0, subnet, vips...)
}

// startSpare is start with spare machines in the lab beyond the cluster's
// masters and workers (day-2 hosts); bootAll boots them too, so boot the
// lab's first masters+workers machines by hand.
func startSpare(t *testing.T, g *WithT, ns string, masters, workers, spare int, subnet string, vips ...string) (*sim.Lab, *agentinstallv1.InfraEnv) {
	ctx := context.Background()
	serviceObjects(t, g)
	api, ingress := "", ""
	if len(vips) == 2 {
		api, ingress = vips[0], vips[1]
	}
	for _, o := range installObjects(ns, ns, masters, workers, api, ingress) {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
	}
	lab := world(t, masters+workers+spare, subnet)
	t.Cleanup(func() {
		for _, m := range lab.Machines {
			m.PowerOff()
		}
	})
	ie := &agentinstallv1.InfraEnv{}
	g.Eventually(func() string {
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ns}, ie)
		return ie.Status.ISODownloadURL
	}).ShouldNot(BeEmpty())
	return lab, ie
}

// bootAll boots every machine of lab from the ISO and approves its Agent.
func bootAll(g *WithT, lab *sim.Lab, ie *agentinstallv1.InfraEnv) {
	for _, m := range lab.Machines {
		bootISO(g, m, ie.Status.ISODownloadURL)
	}
	for _, m := range lab.Machines {
		approve(g, ie.Namespace, m.UUID)
	}
}

// approve waits for the Agent of machine uuid and approves it with the
// seed's merge patch.
func approve(g *WithT, ns, uuid string) *agentinstallv1.Agent {
	ctx := context.Background()
	a := &agentinstallv1.Agent{}
	g.Eventually(func() error { return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: uuid}, a) }).Should(Succeed())
	g.Expect(env.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approved":true}}`)))).To(Succeed())
	return a
}

func agentCondition(g *WithT, ns, uuid, typ string) func() agentinstallv1.Condition {
	return func() agentinstallv1.Condition {
		a := &agentinstallv1.Agent{}
		_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: uuid}, a)
		for _, c := range a.Status.Conditions {
			if string(c.Type) == typ {
				return c
			}
		}
		return agentinstallv1.Condition{}
	}
}

// imageCreatedOf reads ie again and returns its ImageCreated condition.
func imageCreatedOf(g *WithT, ie *agentinstallv1.InfraEnv) func() agentinstallv1.Condition {
	return func() agentinstallv1.Condition {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ie), ie)).To(Succeed())
		for _, c := range ie.Status.Conditions {
			if c.Type == "ImageCreated" {
				return c
			}
		}
		return agentinstallv1.Condition{}
	}
}

func aciState(ns string) func() string {
	return func() string {
		aci := &hiveextv1.AgentClusterInstall{}
		_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ns}, aci)
		return aci.Status.DebugInfo.State
	}
}
