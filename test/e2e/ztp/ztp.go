// Package ztp runs zero-touch agent-based installs for the end-to-end
// and fault tests: the hub's AgentServiceConfig and ClusterImageSet,
// clusters in the shapes of the assisted installer's kube-API, simulated
// machines for them (BareMetalHosts labelled for their InfraEnvs), and the
// checks of a run (completed, nothing orphaned, no disk written twice).
package ztp

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
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/internal/testenv"
)

// ServiceConfig is the AgentServiceConfig "agent" naming the OS image at
// url with its SHA-256 sum, and the release's ClusterImageSet: fmt
// arguments url, sum.
const ServiceConfig = `apiVersion: agent-install.openshift.io/v1beta1
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

// Cluster is a cluster in the shapes of the assisted installer's
// kube-API: Namespace, pull secret, ClusterDeployment, AgentClusterInstall,
// InfraEnv; networking is the VIPs', or user managed without them.
func Cluster(name string, masters int, apiVIP, ingressVIP string) string {
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

// Lab is zero-touch agent-based installs on a hub: the OS image served
// (`metalshift sim image`), and per cluster its objects and a simulator
// (`metalshift sim bmc`) whose machines are BareMetalHosts labelled for the
// cluster's InfraEnv, installed in the converged flow.
type Lab struct {
	// Bin is the metalshift binary, Tools the directory with kubectl and
	// the simulator's tools, HubDir the hub's directory (the simulators
	// find its servers and CA there) and Kubeconfig its kubeconfig.
	Bin, Tools, HubDir, Kubeconfig string
	// Console is what the simulators print (--console).
	Console *Buffer
	// Names of the clusters.
	Names []string
}

// Options are a Lab's clusters.
type Options struct {
	// Clusters, and the control-plane agents of each (1: a single node
	// with user-managed networking; 3: compact, with VIPs).
	Clusters, Masters int
	// Faults is the simulators' fault plan ("" for none); cluster i's
	// simulator takes Seed+i as its seed.
	Faults string
	Seed   uint64
	// Subnet is the second octet of the machines' loopback addresses
	// (127.<Subnet>.<10+i>.x for cluster i): tests running at the same
	// time use different ones.
	Subnet int
}

// Buffer is a buffer several processes write to.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Kubectl runs kubectl against the hub with stdin.
func (l *Lab) Kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(l.Tools, "kubectl"), append([]string{"--kubeconfig", l.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Start serves the OS image and writes the AgentServiceConfig, then each
// cluster's objects, starts its simulator and applies its hosts. The
// processes stop when the test ends.
func (l *Lab) Start(t testing.TB, o Options) {
	t.Helper()
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	if l.Console == nil {
		l.Console = &Buffer{}
	}
	imageEnv := filepath.Join(dir, "image.env")
	l.background(t, "sim", "image", "--size", "8MiB", "--env", imageEnv)
	var env []byte
	g.Eventually(func() string { env, _ = os.ReadFile(imageEnv); return string(env) }, 10*time.Second).Should(gomega.ContainSubstring("IMAGE_SHA256="))
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	out, err := l.Kubectl(fmt.Sprintf(ServiceConfig, vars["IMAGE_URL"], vars["IMAGE_SHA256"]), "apply", "-f", "-")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	for i := range o.Clusters {
		name := fmt.Sprintf("ztp-%d", i)
		l.Names = append(l.Names, name)
		subnet := fmt.Sprintf("127.%d.%d", o.Subnet, 10+i)
		manifest := Cluster(name, 1, "", "")
		if o.Masters > 1 {
			manifest = Cluster(name, o.Masters, subnet+".100", subnet+".101")
		}
		out, err = l.Kubectl(manifest, "apply", "-f", "-")
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
		hosts := filepath.Join(dir, name+"-hosts.yaml")
		args := []string{"sim", "bmc", "--hosts", strconv.Itoa(o.Masters), "--name-prefix", name, "--namespace", name,
			"--subnet", subnet, "--mac-octet", fmt.Sprintf("0x%x", 0x50+i),
			"--host-label", "infraenvs.agent-install.openshift.io=" + name, "--host-annotation", "bmac.agent-install.openshift.io/role=master",
			"--manifests", hosts, "--console", "--hub-dir", l.HubDir, "--bin-dir", l.Tools}
		if o.Faults != "" {
			args = append(args, "--faults", fmt.Sprintf("seed=%d,%s", o.Seed+uint64(i), o.Faults))
		}
		l.background(t, args...)
		// The simulator writes the file in place: read it until it holds
		// every host.
		var data []byte
		g.Eventually(func() int {
			data, _ = os.ReadFile(hosts)
			return strings.Count(string(data), "kind: BareMetalHost")
		}, 30*time.Second, 50*time.Millisecond).Should(gomega.Equal(o.Masters), "%s lists the hosts", hosts)
		out, err = l.Kubectl(string(data), "apply", "-f", "-")
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	}
}

// background runs metalshift with args until the test ends (interrupted,
// then killed).
func (l *Lab) background(t testing.TB, args ...string) {
	t.Helper()
	c := exec.Command(l.Bin, args...)
	c.Stdout, c.Stderr = l.Console, l.Console
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

// Completed counts the clusters whose AgentClusterInstall is Completed.
func (l *Lab) Completed() int {
	n := 0
	for _, name := range l.Names {
		if l.condition(name, "Completed") == "True" {
			n++
		}
	}
	return n
}

func (l *Lab) condition(name, typ string) string {
	out, _ := l.Kubectl("", "-n", name, "get", "agentclusterinstall", name, "-o", `jsonpath={.status.conditions[?(@.type=="`+typ+`")].status}`)
	return out
}

// Outcome is what a Lab's check found.
type Outcome struct {
	// Faults fired in the simulators.
	Faults int
	// Orphans on the hub; Twice, the machines that wrote their disk more
	// than once.
	Orphans, Twice []string
	// BMCTrouble counts the hosts whose BMCReachable condition named BMC
	// trouble (cleared since).
	BMCTrouble int
}

// WaitAndCheck waits for every install to complete (none failed), then
// looks for objects orphaned in the clusters' namespaces, hosts whose BMC
// trouble has not cleared and machines that wrote their disk twice, and
// fails the test on any.
func (l *Lab) WaitAndCheck(t testing.TB, timeout time.Duration) (o Outcome) {
	t.Helper()
	g := gomega.NewWithT(t)
	g.Eventually(l.Completed, timeout, time.Second).Should(gomega.Equal(len(l.Names)), "installs completed")
	for _, name := range l.Names {
		g.Expect(l.condition(name, "Failed")).To(gomega.Equal("False"), name)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	// Dependents of a deleted owner are the garbage collector's to remove:
	// an orphan is one it has not removed within a minute.
	g.Eventually(func(g gomega.Gomega) {
		o.Orphans = nil
		for _, name := range l.Names {
			orphans, err := testenv.Orphans(context.Background(), cfg, name)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			o.Orphans = append(o.Orphans, orphans...)
		}
		g.Expect(o.Orphans).To(gomega.BeEmpty(), "objects left orphaned on the hub")
	}, time.Minute, time.Second).Should(gomega.Succeed())
	o.BMCTrouble = BMCTroubleCleared(g, cfg, l.Names...)
	writes := map[string][]string{}
	console := l.Console.String()
	for _, m := range osWrite.FindAllStringSubmatch(console, -1) {
		writes[m[1]] = append(writes[m[1]], m[2])
	}
	o.Twice = testenv.WrittenTwice(writes)
	o.Faults = len(FiredFault.FindAllString(console, -1))
	g.Expect(o.Twice).To(gomega.BeEmpty(), "machines that wrote their disk twice")
	return o
}

// osWrite is a simulated machine's console line saying the install writes
// the OS image (once per machine in an install that completes).
var osWrite = regexp.MustCompile(`(?m)^(\S+): Writing the OS image to (\S+)$`)

// FiredFault is a simulator's console line for a fault it injected.
var FiredFault = regexp.MustCompile(`(?m)^fault: \S+ fired on `)

// BMCFaults is the BMC fault mix of the fault-rate runs: about one Redfish
// request in ten fails (answered 500, its connection reset, or held until
// the client gives up), and power actions and virtual-media inserts fail
// or lag at the same rate.
const BMCFaults = "redfish.5xx=6%,redfish.reset=3%,redfish.hang=1%:20s,redfish.slowpower=10%:3s,redfish.media=10%"

// Seed is METALSHIFT_CHAOS_SEED (to replay a printed seed), or a new one.
func Seed(t testing.TB) uint64 {
	if s := os.Getenv("METALSHIFT_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("METALSHIFT_CHAOS_SEED: %v", err)
		}
		return seed
	}
	return rand.Uint64() //nolint:gosec // a seed to replay faults by, nothing secret
}

// Runs is METALSHIFT_CHAOS_RUNS, or def.
func Runs(t testing.TB, def int) int {
	if s := os.Getenv("METALSHIFT_CHAOS_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("METALSHIFT_CHAOS_RUNS %q: a positive number", s)
		}
		return n
	}
	return def
}

// Kills draws n instants between 2 and 14 seconds from seed: how long
// after a hub process (or replica) starts, or the install's objects were
// written, it is SIGKILLed. An install on the simulator takes 20 to 60
// seconds, so the kills fall all over it, hub starts included.
func Kills(seed uint64, n int) []time.Duration {
	return KillsBetween(seed, n, 2*time.Second, 14*time.Second)
}

// KillsBetween is Kills with instants between lo and hi, for installs
// shorter than Kills' window (an agent-based install on an idle machine
// completes 10 to 15 seconds after its objects are written).
func KillsBetween(seed uint64, n int, lo, hi time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 1)) //nolint:gosec // instants replayed from a printed seed, nothing secret
	var kills []time.Duration
	for range n {
		kills = append(kills, lo+time.Duration(rng.IntN(int((hi-lo)/time.Millisecond)))*time.Millisecond)
	}
	return kills
}

// BMCTroubleCleared checks, for up to a minute, that no BareMetalHost of
// the namespaces still has an error or a BMCReachable condition other than
// True: the BMC trouble the engine met has cleared. It returns how many
// hosts met some (their condition is set).
func BMCTroubleCleared(g gomega.Gomega, cfg *rest.Config, namespaces ...string) (troubled int) {
	scheme := runtime.NewScheme()
	g.Expect(metal3v1.AddToScheme(scheme)).To(gomega.Succeed())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Eventually(func(g gomega.Gomega) {
		troubled = 0
		for _, ns := range namespaces {
			hosts := &metal3v1.BareMetalHostList{}
			g.Expect(c.List(context.Background(), hosts, client.InNamespace(ns))).To(gomega.Succeed())
			for _, h := range hosts.Items {
				g.Expect(h.Status.ErrorMessage).To(gomega.BeEmpty(), "host %s/%s", ns, h.Name)
				if c := conditions.Get(&h, baremetalhost.BMCReachableCondition); c != nil {
					troubled++
					g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue), "host %s/%s: %s", ns, h.Name, c.Message)
				}
			}
		}
	}, time.Minute, time.Second).Should(gomega.Succeed(), "BMC trouble the hosts' conditions named has cleared")
	return troubled
}
