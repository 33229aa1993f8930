package hub

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

var (
	metalshiftBin string
	toolsDir      string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		tmp, err := os.MkdirTemp("", "metalshift-e2e-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(tmp)
		metalshiftBin = filepath.Join(tmp, "metalshift")
		if out, err := exec.Command("go", "build", "-o", metalshiftBin, "../../../cmd/metalshift").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building metalshift: %v\n%s", err, out)
			return 1
		}
		if toolsDir, err = filepath.Abs(filepath.Join("..", "..", "..", "bin")); err != nil {
			panic(err)
		}
		// The embedded hub that `create cluster` starts finds etcd and kube-apiserver here.
		os.Setenv("METALSHIFT_BIN_DIR", toolsDir)
		return m.Run()
	}())
}

func run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(metalshiftBin, args...).CombinedOutput()
	return string(out), err
}

func kubectl(kubeconfig string, args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(toolsDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// startSim runs `metalshift sim bmc` and `sim image`, and returns the
// hosts manifest path and the image URL and checksum.
func startSim(t *testing.T, hosts int) (string, string, string) {
	t.Helper()
	hostsYAML, imageURL, imageSum, _ := startSimWith(t, hosts)
	return hostsYAML, imageURL, imageSum
}

// startSimWith is startSim with more `sim bmc` flags; it also returns what
// the simulator prints.
func startSimWith(t testing.TB, hosts int, bmcArgs ...string) (string, string, string, *syncBuffer) {
	t.Helper()
	g := NewWithT(t)
	work := t.TempDir()
	simOut := &syncBuffer{}
	sim := exec.Command(metalshiftBin, append([]string{"sim", "bmc", "--hosts", fmt.Sprint(hosts), "--namespace", "e2e",
		"--bin-dir", toolsDir, "--manifests", filepath.Join(work, "hosts.yaml")}, bmcArgs...)...)
	sim.Stdout, sim.Stderr = simOut, simOut
	img := exec.Command(metalshiftBin, "sim", "image", "--size", "4Mi", "--env", filepath.Join(work, "image.env"))
	for _, c := range []*exec.Cmd{sim, img} {
		g.Expect(c.Start()).To(Succeed())
		t.Cleanup(func() {
			_ = c.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = c.Process.Kill()
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("simulator output:\n%s", simOut)
		}
	})
	var env []byte
	g.Eventually(func() string { env, _ = os.ReadFile(filepath.Join(work, "image.env")); return string(env) }, 10*time.Second).Should(ContainSubstring("IMAGE_SHA256="))
	g.Eventually(func() error { _, err := os.Stat(filepath.Join(work, "hosts.yaml")); return err }, 10*time.Second).Should(Succeed())
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	return filepath.Join(work, "hosts.yaml"), vars["IMAGE_URL"], vars["IMAGE_SHA256"], simOut
}

// phaseRecorder polls the hub's Machines and records each one's phases in order.
type phaseRecorder struct {
	mu     sync.Mutex
	phases map[string][]string
	// servedBootstrap: the bootstrap node's config was seen served by the
	// hub's ignition server.
	servedBootstrap atomic.Bool
}

func (r *phaseRecorder) run(ctx context.Context, c client.Client, ns string) {
	for ctx.Err() == nil {
		list := &clusterv1.MachineList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err == nil {
			r.mu.Lock()
			for _, m := range list.Items {
				seen := r.phases[m.Name]
				if p := m.Status.Phase; p != "" && (len(seen) == 0 || seen[len(seen)-1] != p) {
					r.phases[m.Name] = append(seen, p)
				}
			}
			r.mu.Unlock()
		}
		cfgs := &bootstrapv1.OpenShiftConfigList{}
		if err := c.List(ctx, cfgs, client.InNamespace(ns)); err == nil {
			for _, cfg := range cfgs.Items {
				c := conditions.Get(&cfg, bootstrapv1.DataSecretAvailableCondition)
				if cfg.Status.Role == bootstrapv1.RoleBootstrap && c != nil && strings.Contains(c.Message, "served by the hub's ignition server") {
					r.servedBootstrap.Store(true)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *phaseRecorder) get(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.phases[name])
}

// names returns the Machines recorded whose names start with prefix.
func (r *phaseRecorder) names(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.phases {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// inOrder fails unless got follows the order of want (phases may be skipped
// between two polls, but never reordered or repeated) and holds every phase
// of must: the phases that last long enough that a poll cannot miss them.
func inOrder(got, want, must []string) bool {
	for _, p := range must {
		if !slices.Contains(got, p) {
			return false
		}
	}
	i := 0
	for _, p := range got {
		j := slices.Index(want[i:], p)
		if j < 0 {
			return false
		}
		i += j + 1
	}
	return true
}

// TestInstallScaleDestroy is `make demo` as a test: an install-config for 3
// masters and 2 workers on simulated Redfish hosts, `create cluster` on the
// embedded hub, 5 Ready Nodes with the Machines' providerIDs, workers scaled
// to 3 and back to 2 (the removed Node cordoned first), `destroy cluster`.
func TestInstallScaleDestroy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	hostsYAML, imageURL, imageSum := startSim(t, 6)
	dir := t.TempDir()
	vip := fmt.Sprintf("127.%d.%d.10", 100+rand.IntN(100), rand.IntN(250))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run(t, "gather", "--dir", dir)
			t.Logf("%s", out)
			out, _ = kubectl(filepath.Join(dir, "hub", "kubeconfig"), "-n", "e2e", "get", "machines,metalmachines,bmh", "-o", "wide")
			t.Logf("hub:\n%s", out)
			out, _ = kubectl(filepath.Join(dir, "auth", "kubeconfig"), "get", "nodes,csr", "-o", "wide")
			t.Logf("installed cluster:\n%s", out)
			if data, err := os.ReadFile(filepath.Join(dir, "hub", "logs", "manager.log")); err == nil && len(data) > 20000 {
				t.Logf("manager.log (tail):\n%s", data[len(data)-20000:])
			}
		}
		_, _ = run(t, "hub", "down", "--dir", filepath.Join(dir, "hub"))
	})

	out, err := run(t, "create", "install-config", "--dir", dir, "--name", "e2e", "--api-vip", vip, "--masters", "3", "--workers", "2",
		"--hosts-from", hostsYAML, "--os-image-url", imageURL, "--os-image-checksum", imageSum)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	out, err = run(t, "create", "manifests", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(filepath.Join(dir, "cluster-api", "18_openshiftcontrolplane_e2e.yaml")).To(BeAnExistingFile())
	g.Expect(filepath.Join(dir, "manifests", "cluster-config.yaml")).To(BeAnExistingFile())
	// A user manifest added after `create manifests` reaches the installed
	// cluster. At 96 KiB it makes the bootstrap node's config too large for
	// user data: the hub's ignition server serves it, the host fetches it.
	big := make([]byte, 72<<10)
	for i := range big {
		big[i] = "abcdefghijklmnopqrstuvwxyz"[rand.IntN(26)]
	}
	g.Expect(os.WriteFile(filepath.Join(dir, "openshift", "99_user.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-the-user\n  namespace: default\ndata:\n  hello: world\n  big: "+string(big)+"\n"), 0o600)).To(Succeed())

	hubKubeconfig := filepath.Join(dir, "hub", "kubeconfig")
	create := exec.Command(metalshiftBin, "create", "cluster", "--dir", dir, "--timeout", "8m")
	createOut := &syncBuffer{}
	create.Stdout, create.Stderr = createOut, createOut
	g.Expect(create.Start()).To(Succeed())
	createDone := make(chan error, 1)
	go func() { createDone <- create.Wait() }()

	// Record the Machines' phases from the moment the hub serves.
	hub := hubClient(g, hubKubeconfig)
	rec := &phaseRecorder{phases: map[string][]string{}}
	ctx, stopRec := context.WithCancel(context.Background())
	defer stopRec()
	go rec.run(ctx, hub, "e2e")

	select {
	case err := <-createDone:
		g.Expect(err).NotTo(HaveOccurred(), "%s", createOut)
	case <-time.After(9 * time.Minute):
		_ = create.Process.Kill()
		t.Fatalf("create cluster did not finish:\n%s", createOut)
	}
	t.Logf("create cluster:\n%s", createOut)
	g.Expect(createOut.String()).To(ContainSubstring("Bootstrap node: Removed"))
	g.Expect(createOut.String()).To(ContainSubstring("Reached install-complete"))

	// The installed cluster: 5 Ready Nodes carrying the Machines' providerIDs.
	admin := filepath.Join(dir, "auth", "kubeconfig")
	out, err = kubectl(admin, "get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, " Ready ")).To(Equal(5), "%s", out)
	out, err = kubectl(admin, "get", "nodes", "-o", "jsonpath={range .items[*]}{.spec.providerID}{\"\\n\"}{end}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	nodeIDs := strings.Fields(out)
	// Kubelets joined with the bootstrap token and got their client
	// certificates through approved and signed CSRs.
	out, err = kubectl(admin, "get", "csr", "-o", "jsonpath={range .items[*]}{.spec.username} {.status.conditions[0].type} {.spec.signerName}{\"\\n\"}{end}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, "kubernetes.io/kube-apiserver-client-kubelet")).To(Equal(5), "%s", out)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		g.Expect(line).To(MatchRegexp(`^system:bootstrap:[a-z0-9]{6} Approved `), "%s", out)
	}
	machines := &clusterv1.MachineList{}
	g.Expect(hub.List(context.Background(), machines, client.InNamespace("e2e"))).To(Succeed())
	g.Expect(machines.Items).To(HaveLen(5))
	out, err = kubectl(admin, "get", "nodes", "-o", "jsonpath={.items[*].status.nodeInfo.kubeletVersion}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	for _, m := range machines.Items {
		for _, v := range strings.Fields(out) {
			g.Expect(v).To(Equal(m.Spec.Version), "kubelets run the release's Kubernetes, the Machines' version")
		}
		g.Expect(m.Status.Phase).To(Equal("Running"), m.Name)
		g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), m.Name)
		g.Expect(nodeIDs).To(ContainElement(m.Spec.ProviderID), m.Name)
	}
	out, err = kubectl(admin, "get", "clusterversion", "version", "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(Equal("True"))
	checkBaremetalOperator(g, admin)
	out, err = kubectl(admin, "-n", "default", "get", "configmap", "from-the-user", "-o", "jsonpath={.data.hello}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(Equal("world"))
	out, err = kubectl(admin, "-n", "default", "get", "configmap", "from-the-user", "-o", "jsonpath={.data.big}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(string(big)), "the manifest in the served config arrived whole")
	g.Expect(rec.servedBootstrap.Load()).To(BeTrue(), "the bootstrap config was served by the ignition server")
	out, err = run(t, "wait-for", "bootstrap-complete", "--dir", dir, "--timeout", "30s")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	// Scale the workers to 3 and back to 2; the removed Node is cordoned before it goes.
	out, err = kubectl(hubKubeconfig, "-n", "e2e", "scale", "machinedeployment", "e2e-worker", "--replicas", "3")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(func() int {
		out, _ := kubectl(admin, "get", "nodes", "--no-headers")
		return strings.Count(out, " Ready ")
	}, 3*time.Minute, time.Second).Should(Equal(6))
	// A fourth worker finds no free host: its Machine stays Provisioning and
	// its MetalMachine says why.
	out, err = kubectl(hubKubeconfig, "-n", "e2e", "scale", "machinedeployment", "e2e-worker", "--replicas", "4")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	waiting := func(g Gomega) {
		mms := &infrav1.MetalMachineList{}
		g.Expect(hub.List(context.Background(), mms, client.InNamespace("e2e"))).To(Succeed())
		n := 0
		for _, mm := range mms.Items {
			if c := conditions.Get(&mm, infrav1.HostClaimedCondition); c != nil && c.Reason == infrav1.NoHostAvailableReason {
				n++
				g.Expect(c.Message).To(ContainSubstring("No available BareMetalHost"))
				m, err := util.GetOwnerMachine(context.Background(), hub, mm.ObjectMeta)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(m).NotTo(BeNil())
				g.Expect(m.Status.Phase).To(Equal("Provisioning"), m.Name)
			}
		}
		g.Expect(n).To(Equal(1))
	}
	g.Eventually(waiting, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Consistently(waiting, 3*time.Second, 500*time.Millisecond).Should(Succeed())
	out, err = kubectl(hubKubeconfig, "-n", "e2e", "scale", "machinedeployment", "e2e-worker", "--replicas", "2")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	cordoned := ""
	g.Eventually(func() string {
		if out, _ := kubectl(admin, "get", "nodes", "-o", "jsonpath={range .items[?(@.spec.unschedulable==true)]}{.metadata.name}{end}"); out != "" {
			cordoned = out
		}
		return cordoned
	}, 3*time.Minute, 100*time.Millisecond).ShouldNot(BeEmpty())
	g.Eventually(func() string {
		out, _ := kubectl(admin, "get", "nodes", "-o", "name")
		return out
	}, 3*time.Minute, time.Second).ShouldNot(ContainSubstring("node/" + cordoned))

	// The control plane scales through its scale subresource: a fourth
	// master joins, then the newest leaves, cordoned first.
	out, err = kubectl(hubKubeconfig, "-n", "e2e", "scale", "openshiftcontrolplane", "e2e", "--replicas", "4")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(func() int {
		out, _ := kubectl(admin, "get", "nodes", "--no-headers", "-l", "node-role.kubernetes.io/master")
		return strings.Count(out, " Ready ")
	}, 3*time.Minute, time.Second).Should(Equal(4))
	g.Eventually(func() string {
		out, _ := kubectl(hubKubeconfig, "-n", "e2e", "get", "openshiftcontrolplane", "e2e", "-o", "jsonpath={.status.readyReplicas}")
		return out
	}, time.Minute, time.Second).Should(Equal("4"))
	out, err = kubectl(hubKubeconfig, "-n", "e2e", "scale", "openshiftcontrolplane", "e2e", "--replicas", "3")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(func() string {
		out, _ := kubectl(admin, "get", "nodes", "-o", "name")
		return out
	}, 3*time.Minute, time.Second).ShouldNot(ContainSubstring("e2e-master-3"))
	g.Eventually(func() string {
		out, _ := kubectl(hubKubeconfig, "-n", "e2e", "get", "openshiftcontrolplane", "e2e", "-o", "jsonpath={.status.replicas}/{.status.readyReplicas}")
		return out
	}, time.Minute, time.Second).Should(Equal("3/3"))

	out, err = run(t, "gather", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(ContainSubstring("log-bundle-"))

	out, err = run(t, "destroy", "cluster", "--dir", dir, "--timeout", "5m")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	t.Logf("destroy cluster:\n%s", out)
	g.Expect(out).To(ContainSubstring("6 of 6 hosts available"))
	stopRec()

	machinePhases := []string{"Pending", "Provisioning", "Provisioned", "Running", "Deleting"}
	for _, name := range []string{"e2e-master-0", "e2e-master-1", "e2e-master-2", "e2e-master-3"} {
		got := rec.get(name)
		g.Expect(inOrder(got, machinePhases, []string{"Provisioning", "Running", "Deleting"})).To(BeTrue(), "%s: %v", name, got)
	}
	// The bootstrap node never joins as a Node: never Running.
	got := rec.get("e2e-bootstrap")
	g.Expect(inOrder(got, []string{"Pending", "Provisioning", "Provisioned", "Deleting"}, []string{"Provisioning", "Provisioned", "Deleting"})).
		To(BeTrue(), "e2e-bootstrap: %v", got)
	// Four workers were made (2, scaled to 3, then a fourth without a
	// host), and all were deleted.
	workers := rec.names("e2e-worker-")
	g.Expect(len(workers)).To(BeNumerically(">=", 4), "%v", workers)
	running := 0
	for _, name := range workers {
		got := rec.get(name)
		g.Expect(inOrder(got, machinePhases, []string{"Provisioning", "Deleting"})).To(BeTrue(), "%s: %v", name, got)
		if slices.Contains(got, "Running") {
			running++
		}
	}
	g.Expect(running).To(BeNumerically(">=", 3), "the workers that had a host ran")
}

// TestInvalidInstallConfig: every problem with its field path, a non-zero
// exit, and nothing applied (no hub started).
func TestInvalidInstallConfig(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(`apiVersion: v1
baseDomain: Example_COM
metadata:
  name: bad.name
controlPlane:
  name: master
  replicas: 2
pullSecret: "{}"
platform:
  baremetal:
    apiVIPs: [not-an-ip]
    hosts:
    - name: host-0
      bootMACAddress: nope
      bmc: {address: "", username: admin, password: secret}
`), 0o600)).To(Succeed())
	out, err := run(t, "create", "cluster", "--dir", dir)
	g.Expect(err).To(HaveOccurred())
	for _, path := range []string{"baseDomain", "metadata.name", "controlPlane.replicas", "platform.baremetal.apiVIPs[0]",
		"platform.baremetal.hosts[0].bootMACAddress", "platform.baremetal.hosts[0].bmc.address", "platform.baremetal.hosts", "metalshift.osImage.url"} {
		g.Expect(out).To(ContainSubstring(path+":"), out)
	}
	g.Expect(out).NotTo(ContainSubstring("secret"))
	g.Expect(filepath.Join(dir, "hub")).NotTo(BeADirectory())
	g.Expect(filepath.Join(dir, "cluster-api")).NotTo(BeADirectory())
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCreateClusterOnExistingHub: `create cluster --kubeconfig` installs on
// a hub that already runs (here one from `hub up`), a single master and a
// worker; `destroy cluster` returns the hosts and leaves that hub running.
func TestCreateClusterOnExistingHub(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	hostsYAML, imageURL, imageSum := startSim(t, 3)
	hubDir, dir := t.TempDir(), t.TempDir()
	startHub(t, hubDir)
	hubKubeconfig := filepath.Join(hubDir, "kubeconfig")

	vip := fmt.Sprintf("127.%d.%d.10", 100+rand.IntN(100), rand.IntN(250))
	out, err := run(t, "create", "install-config", "--dir", dir, "--name", "small", "--api-vip", vip, "--masters", "1", "--workers", "1",
		"--hosts-from", hostsYAML, "--os-image-url", imageURL, "--os-image-checksum", imageSum)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	out, err = run(t, "create", "cluster", "--dir", dir, "--kubeconfig", hubKubeconfig, "--timeout", "8m")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	t.Logf("create cluster:\n%s", out)
	g.Expect(out).To(ContainSubstring("Reached install-complete"))
	g.Expect(filepath.Join(dir, "hub")).NotTo(BeADirectory(), "no embedded hub was started")

	out, err = kubectl(filepath.Join(dir, "auth", "kubeconfig"), "get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, " Ready ")).To(Equal(2), out)
	out, err = kubectl(hubKubeconfig, "-n", "small", "get", "machines", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, "Running")).To(Equal(2), out)

	out, err = run(t, "destroy", "cluster", "--dir", dir, "--kubeconfig", hubKubeconfig, "--timeout", "5m")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(ContainSubstring("3 of 3 hosts available"))
	out, err = kubectl(hubKubeconfig, "get", "namespace", "small")
	g.Expect(err).To(HaveOccurred(), "the cluster's namespace is gone: %s", out)
	out, err = run(t, "hub", "status", "--dir", hubDir)
	g.Expect(err).NotTo(HaveOccurred(), "the hub given by --kubeconfig keeps running: %s", out)
	g.Expect(out).To(ContainSubstring("Ready"))
}

// startHub runs `metalshift hub up [args] --dir hubDir` until the test ends
// (then `hub down`; its output and the manager's log tail on failure) and
// waits until the hub serves. It returns what hub up prints.
func startHub(t testing.TB, hubDir string, args ...string) *syncBuffer {
	t.Helper()
	hubOut := &syncBuffer{}
	hub := exec.Command(metalshiftBin, append(append([]string{"hub", "up"}, args...), "--dir", hubDir)...)
	hub.Stdout, hub.Stderr = hubOut, hubOut
	if err := hub.Start(); err != nil {
		t.Fatal(err)
	}
	hubDone := make(chan error, 1)
	go func() { hubDone <- hub.Wait() }()
	t.Cleanup(func() {
		_, _ = run(t, "hub", "down", "--dir", hubDir)
		select {
		case <-hubDone:
		case <-time.After(time.Minute):
			_ = hub.Process.Kill()
			<-hubDone
		}
		if t.Failed() {
			t.Logf("hub up:\n%s", hubOut)
			if data, err := os.ReadFile(filepath.Join(hubDir, "logs", "manager.log")); err == nil && len(data) > 20000 {
				t.Logf("manager.log (tail):\n%s", data[len(data)-20000:])
			}
		}
	})
	if out, err := run(t, "hub", "status", "--dir", hubDir, "--wait", "3m"); err != nil {
		t.Fatalf("hub status: %v\n%s\n%s", err, out, hubOut)
	}
	return hubOut
}
