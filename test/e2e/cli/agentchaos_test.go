package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/localcp"
)

// ztpRun is agent-based installs on one embedded hub (`metalshift hub
// up`), zero-touch: each cluster's machines are BareMetalHosts of a
// simulator (`metalshift sim bmc`) labelled for the cluster's InfraEnv,
// installed in the converged flow.
type ztpRun struct {
	name string
	// clusters: how many, and the control-plane agents of each (1: a
	// single node with user-managed networking; 3: compact, with VIPs).
	clusters, masters int
	// faults is the simulators' fault plan ("" for none); seed its seed.
	faults string
	seed   uint64
	// kills are the instants, after the previous hub process started, at
	// which the hub is SIGKILLed and started again on its directory.
	kills []time.Duration
}

// ztpOutcome is what a ztpRun measured.
type ztpOutcome struct {
	took          time.Duration
	completed     bool
	faults, kills int
	orphans       []string
	twice         []string
}

// syncBuf is a bytes buffer several processes write to.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background runs a command until the test ends (interrupted, then killed).
func background(t *testing.T, out *syncBuf, name string, args ...string) {
	t.Helper()
	c := exec.Command(name, args...)
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	})
}

const ztpServiceConfig = `apiVersion: agent-install.openshift.io/v1beta1
kind: AgentServiceConfig
metadata:
  name: agent
spec:
  osImages:
  - openshiftVersion: "4.16"
    version: "416.94"
    url: %s
    cpuArchitecture: x86_64
    checksum: sha256:%s
---
apiVersion: hive.openshift.io/v1
kind: ClusterImageSet
metadata:
  name: openshift-v4.16.3
spec:
  releaseImage: quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64
`

// ztpCluster is a cluster in the shapes of the assisted installer's
// kube-API: Namespace, pull secret, ClusterDeployment, AgentClusterInstall,
// InfraEnv; networking is the VIPs', or user managed without them.
func ztpCluster(name string, masters int, apiVIP, ingressVIP string) string {
	networking := "    userManagedNetworking: true"
	if apiVIP != "" {
		networking = fmt.Sprintf("  apiVIPs:\n  - %s\n  ingressVIPs:\n  - %s", apiVIP, ingressVIP)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: pull-secret
  namespace: %[1]s
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths":{"quay.io":{"auth":"c2ltOnNpbQ=="}}}'
---
apiVersion: hive.openshift.io/v1
kind: ClusterDeployment
metadata:
  name: %[1]s
  namespace: %[1]s
spec:
  clusterName: %[1]s
  baseDomain: example.com
  pullSecretRef:
    name: pull-secret
  clusterInstallRef:
    group: extensions.hive.openshift.io
    version: v1beta1
    kind: AgentClusterInstall
    name: %[1]s
  platform:
    agentBareMetal: {}
---
apiVersion: extensions.hive.openshift.io/v1beta1
kind: AgentClusterInstall
metadata:
  name: %[1]s
  namespace: %[1]s
spec:
  clusterDeploymentRef:
    name: %[1]s
  imageSetRef:
    name: openshift-v4.16.3
  networking:
    clusterNetwork:
    - cidr: 10.128.0.0/14
      hostPrefix: 23
    serviceNetwork:
    - 172.30.0.0/16
%[3]s
  provisionRequirements:
    controlPlaneAgents: %[2]d
    workerAgents: 0
  sshPublicKey: ssh-ed25519 AAAA user@host
---
apiVersion: agent-install.openshift.io/v1beta1
kind: InfraEnv
metadata:
  name: %[1]s
  namespace: %[1]s
spec:
  clusterRef:
    name: %[1]s
    namespace: %[1]s
  pullSecretRef:
    name: pull-secret
  sshAuthorizedKey: ssh-ed25519 AAAA user@host
`, name, masters, networking)
}

// installZTP runs r and checks that every cluster installed, that nothing
// is orphaned in the clusters' namespaces, and that no machine wrote its
// disk twice.
func installZTP(t *testing.T, r ztpRun) (o ztpOutcome) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	hubDir := filepath.Join(dir, "hub")
	hubOut, console := &syncBuf{}, &syncBuf{}
	var hub *exec.Cmd
	var hubDone chan struct{}
	startHub := func() {
		hub = exec.Command(metalshiftBin, "hub", "up", "--dir", hubDir, "--bin-dir", toolsDir)
		hub.Stdout, hub.Stderr = hubOut, hubOut
		g.Expect(hub.Start()).To(Succeed())
		hubDone = make(chan struct{})
		go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(hub, hubDone)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(t, hubDir, "", "get", "agentclusterinstalls,agents,bmh", "-A", "-o", "wide")
			t.Logf("%s: hub:\n%s\nhub processes printed:\n%s", r.name, out, tailOf(hubOut.String(), 8000))
			if data, err := os.ReadFile(filepath.Join(hubDir, "logs", "manager.log")); err == nil {
				t.Logf("%s: manager.log (tail):\n%s", r.name, tailOf(string(data), 20000))
			}
			t.Logf("%s: simulators (tail):\n%s", r.name, tailOf(console.String(), 20000))
		}
		_, _ = metalshift(t, "hub", "down", "--dir", hubDir)
		if hub != nil {
			_ = hub.Process.Kill()
			<-hubDone
		}
	})
	start := time.Now()
	startHub()
	out, err := metalshift(t, "hub", "status", "--dir", hubDir, "--wait", "3m")
	g.Expect(err).NotTo(HaveOccurred(), "%s\n%s", out, hubOut)

	imageEnv := filepath.Join(dir, "image.env")
	background(t, console, metalshiftBin, "sim", "image", "--size", "8MiB", "--env", imageEnv)
	var env []byte
	g.Eventually(func() string { env, _ = os.ReadFile(imageEnv); return string(env) }, 10*time.Second).Should(ContainSubstring("IMAGE_SHA256="))
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	out, err = kubectl(t, hubDir, fmt.Sprintf(ztpServiceConfig, vars["IMAGE_URL"], vars["IMAGE_SHA256"]), "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)

	var names []string
	for i := range r.clusters {
		name := fmt.Sprintf("ztp-%d", i)
		names = append(names, name)
		subnet := fmt.Sprintf("127.44.%d", 10+i)
		var manifest string
		if r.masters == 1 {
			manifest = ztpCluster(name, 1, "", "")
		} else {
			manifest = ztpCluster(name, r.masters, subnet+".100", subnet+".101")
		}
		out, err = kubectl(t, hubDir, manifest, "apply", "-f", "-")
		g.Expect(err).NotTo(HaveOccurred(), out)
		hosts := filepath.Join(dir, name+"-hosts.yaml")
		args := []string{"sim", "bmc", "--hosts", strconv.Itoa(r.masters), "--name-prefix", name, "--namespace", name,
			"--subnet", subnet, "--mac-octet", fmt.Sprintf("0x%x", 0x50+i),
			"--host-label", "infraenvs.agent-install.openshift.io=" + name, "--host-annotation", "bmac.agent-install.openshift.io/role=master",
			"--manifests", hosts, "--console", "--hub-dir", hubDir, "--bin-dir", toolsDir}
		if r.faults != "" {
			args = append(args, "--faults", fmt.Sprintf("seed=%d,%s", r.seed+uint64(i), r.faults))
		}
		background(t, console, metalshiftBin, args...)
		g.Eventually(func() error { _, err := os.Stat(hosts); return err }, 30*time.Second).Should(Succeed())
		data, err := os.ReadFile(hosts)
		g.Expect(err).NotTo(HaveOccurred())
		out, err = kubectl(t, hubDir, string(data), "apply", "-f", "-")
		g.Expect(err).NotTo(HaveOccurred(), out)
	}

	completed := func() int {
		n := 0
		for _, name := range names {
			out, _ := kubectl(t, hubDir, "", "-n", name, "get", "agentclusterinstall", name, "-o", `jsonpath={.status.conditions[?(@.type=="Completed")].status}`)
			if out == "True" {
				n++
			}
		}
		return n
	}
	for i, after := range r.kills {
		time.Sleep(after) // the instant of the kill: the point of the test, not a wait for a state
		if completed() == len(names) {
			break
		}
		g.Expect(hub.Process.Signal(syscall.SIGKILL)).To(Succeed())
		<-hubDone
		o.kills++
		t.Logf("%s: kill %d of %d, %s after the hub process started, %s into the run", r.name, i+1, len(r.kills), after, time.Since(start).Round(time.Second))
		_, _ = hubOut.Write([]byte(fmt.Sprintf("--- SIGKILLed after %s; hub up\n", after)))
		startHub()
	}
	g.Eventually(completed, 15*time.Minute, time.Second).Should(Equal(len(names)), "%s: installs completed", r.name)
	o.took = time.Since(start)
	o.completed = true
	for _, name := range names {
		out, _ := kubectl(t, hubDir, "", "-n", name, "get", "agentclusterinstall", name, "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].status}`)
		g.Expect(out).To(Equal("False"), "%s: %s", r.name, name)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", localcp.KubeconfigPath(hubDir))
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range names {
		orphans, err := testenv.Orphans(context.Background(), cfg, name)
		g.Expect(err).NotTo(HaveOccurred())
		o.orphans = append(o.orphans, orphans...)
	}
	writes := map[string][]string{}
	for _, m := range osWrite.FindAllStringSubmatch(console.String(), -1) {
		writes[m[1]] = append(writes[m[1]], m[2])
	}
	o.twice = testenv.WrittenTwice(writes)
	o.faults = o.kills + len(firedFault.FindAllString(console.String(), -1))
	g.Expect(o.orphans).To(BeEmpty(), "%s: objects left orphaned on the hub", r.name)
	g.Expect(o.twice).To(BeEmpty(), "%s: machines that wrote their disk twice", r.name)
	return o
}

// osWrite is a simulated machine's console line saying the install writes
// the OS image (once per machine in an install that completes).
var osWrite = regexp.MustCompile(`(?m)^(\S+): Writing the OS image to (\S+)$`)

// firedFault is a simulator's console line for a fault it injected.
var firedFault = regexp.MustCompile(`(?m)^fault: \S+ fired on `)

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// chaosSeed is METALSHIFT_CHAOS_SEED (to replay a printed seed), or a new one.
func chaosSeed(t *testing.T) uint64 {
	if s := os.Getenv("METALSHIFT_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("METALSHIFT_CHAOS_SEED: %v", err)
		}
		return seed
	}
	return rand.Uint64()
}

// chaosRuns is METALSHIFT_CHAOS_RUNS, or def.
func chaosRuns(t *testing.T, def int) int {
	if s := os.Getenv("METALSHIFT_CHAOS_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("METALSHIFT_CHAOS_RUNS %q: a positive number", s)
		}
		return n
	}
	return def
}

// reportZTP runs base (fault-free), then runs made by next, and reports
// them as one scenario of `make chaos`.
func reportZTP(t *testing.T, scenario string, runs int, base ztpRun, next func(seed uint64) ztpRun) {
	free := installZTP(t, base)
	row := testenv.ChaosRow{Scenario: scenario, FaultFree: free.took}
	var took time.Duration
	for i := range runs {
		seed := chaosSeed(t)
		r := next(seed)
		var o ztpOutcome
		ok := t.Run(fmt.Sprintf("run-%d-seed-%d", i+1, seed), func(t *testing.T) {
			t.Logf("%s: seed %d (replay: METALSHIFT_CHAOS_SEED=%d METALSHIFT_CHAOS_RUNS=1)", scenario, seed, seed)
			o = installZTP(t, r)
		})
		row.Runs++
		row.Faults += o.faults
		row.Orphans += len(o.orphans)
		row.DoubleWrites += len(o.twice)
		if ok && o.completed {
			row.Completed++
			took += o.took
		} else {
			row.Seeds = append(row.Seeds, strconv.FormatUint(seed, 10))
		}
	}
	if row.Completed > 0 {
		row.Took = took / time.Duration(row.Completed)
	}
	testenv.ReportChaos(t, row)
}

// bmcFaults is the BMC fault mix of the fault-rate runs: about one Redfish
// request in ten fails (answered 500, its connection reset, or held until
// the client gives up), and power actions and virtual-media inserts fail
// or lag at the same rate.
const bmcFaults = "redfish.5xx=6%,redfish.reset=3%,redfish.hang=1%:20s,redfish.slowpower=10%:3s,redfish.media=10%"

// randomKills draws n instants between 3 and 25 seconds after a hub
// process starts, from seed.
func randomKills(seed uint64, n int) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 1))
	var kills []time.Duration
	for range n {
		kills = append(kills, time.Duration(3000+rng.IntN(22000))*time.Millisecond)
	}
	return kills
}

// TestZTPUnderFaultsAndAKill is the short run of the fault suite in make
// test: a single-node ZTP install whose BMC fails about one request in
// ten, with the hub SIGKILLed once at a random instant: it completes,
// nothing is orphaned, the disk is written once.
func TestZTPUnderFaultsAndAKill(t *testing.T) {
	t.Parallel()
	seed := chaosSeed(t)
	t.Logf("seed %d (replay: METALSHIFT_CHAOS_SEED=%d)", seed, seed)
	o := installZTP(t, ztpRun{name: "sno under BMC faults and a kill", clusters: 1, masters: 1, faults: bmcFaults, seed: seed, kills: randomKills(seed, 1)})
	t.Logf("completed in %s with %d faults (%d kills)", o.took.Round(time.Second), o.faults, o.kills)
}

// TestChaosZTPUnderBMCFaults (make chaos): 10 single-node clusters installed
// zero-touch at once while about one BMC request in ten fails, against the
// same run without faults measured first.
func TestChaosZTPUnderBMCFaults(t *testing.T) {
	testenv.RequireChaos(t)
	reportZTP(t, "ztp-10-sno-bmc-faults-10%", chaosRuns(t, 1), ztpRun{name: "10 sno fault-free", clusters: 10, masters: 1},
		func(seed uint64) ztpRun {
			return ztpRun{name: "10 sno under BMC faults", clusters: 10, masters: 1, faults: bmcFaults, seed: seed}
		})
}

// TestChaosZTPHubKilledAnywhere (make chaos): a compact cluster (three
// control-plane hosts, converged flow) installed zero-touch while the hub
// is SIGKILLed at 4 random instants and started again each time, over 5
// runs by default.
func TestChaosZTPHubKilledAnywhere(t *testing.T) {
	testenv.RequireChaos(t)
	reportZTP(t, "ztp-compact-hub-killed-anywhere", chaosRuns(t, 5), ztpRun{name: "compact fault-free", clusters: 1, masters: 3},
		func(seed uint64) ztpRun {
			return ztpRun{name: "compact, hub killed anywhere", clusters: 1, masters: 3, seed: seed, kills: randomKills(seed, 4)}
		})
}
