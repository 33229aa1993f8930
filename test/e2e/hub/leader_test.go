package hub

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/manager"
)

// TestLeaderKilledMidProvisioning: two `cmd/manager` replicas with
// --leader-elect run the controllers of a hub started with `hub up
// --controllers=false`, behind a stand-in for a Kubernetes Service (a TCP
// proxy on the hub's webhook, deploy and ignition ports, TLS passing
// through). An install runs; the leader is SIGKILLed while a host is being
// provisioned; the other replica takes the Lease over and completes the
// install, and no host's disk is written twice.
func TestLeaderKilledMidProvisioning(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	work := t.TempDir()
	managerBin := filepath.Join(work, "manager")
	out, err := exec.Command("go", "build", "-o", managerBin, "../../../cmd/manager").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "building the manager: %s", out)
	// The simulator prints the machines' consoles: the deploy agent's
	// "Writing <image> to <disk>" lines count the disks written.
	hostsYAML, imageURL, imageSum, console := startSimWith(t, 3, "--console")

	rh := startReplicatedHub(t, g, work, managerBin)
	hubOut, hubKubeconfig, hubc, replicas := rh.out, rh.kubeconfig, rh.client, rh.replicas
	dir := filepath.Join(work, "install")
	leader, follower := rh.leader(g)
	lease := &coordinationv1.Lease{}
	leaseKey := client.ObjectKey{Namespace: "metalshift-system", Name: manager.Name}
	g.Expect(hubc.Get(context.Background(), leaseKey, lease)).To(Succeed())
	firstHolder := *lease.Spec.HolderIdentity
	t.Logf("%s (pid %d) leads as %s; %s (pid %d) waits", leader.name, leader.cmd.Process.Pid, firstHolder, follower.name, follower.cmd.Process.Pid)

	// The install, as in TestCreateClusterOnExistingHub, with a user
	// manifest that makes the bootstrap node's config too large for user
	// data: the ignition server behind the proxy serves it.
	inst := startLargeInstall(t, g, dir, hubKubeconfig, hostsYAML, imageURL, imageSum, func() {
		t.Logf("hub up:\n%s", hubOut)
		t.Logf("simulator:\n%s", tail(console.String(), 20000))
		for _, r := range replicas {
			data, _ := os.ReadFile(r.log)
			t.Logf("%s log (tail):\n%s", r.name, tail(string(data), 20000))
		}
	})

	// Mid-provisioning: the engine booted a host's deploy agent for its
	// request, and the image is not reported written yet.
	midway, seen := waitMidProvisioning(g, hubc, inst.out)
	g.Expect(hubc.Get(context.Background(), leaseKey, lease)).To(Succeed())
	g.Expect(*lease.Spec.HolderIdentity).To(Equal(firstHolder), "the leader still leads")
	g.Expect(follower.acquiredLease()).To(BeFalse(), "%s still waits", follower.name)
	g.Expect(leader.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Eventually(leader.done, time.Minute).Should(BeClosed())
	t.Logf("SIGKILLed %s mid-provisioning; hosts: %s", leader.name, strings.Join(seen, "; "))

	// The other replica takes the Lease over and finishes the install.
	g.Eventually(func() string {
		if err := hubc.Get(context.Background(), leaseKey, lease); err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}, 2*time.Minute, time.Second).ShouldNot(Or(BeEmpty(), Equal(firstHolder)), "the Lease changes holder")
	g.Eventually(follower.acquiredLease, time.Minute, time.Second).Should(BeTrue(), "%s leads now", follower.name)
	inst.wait(t, g)
	g.Expect(follower.running()).To(BeTrue(), "the replica that took over still runs")

	checkDiskWrites(t, g, console.String(), midway)
}

// largeInstall is `metalshift create cluster` of one master and one
// worker in namespace e2e, running in the background, with a user manifest
// that makes the bootstrap node's config too large for user data: the
// ignition server serves it.
type largeInstall struct {
	dir, big string
	out      *syncBuffer
	done     chan error
}

// startLargeInstall writes the install-config and manifests into dir and
// starts create cluster against the hub; onFail logs more when the test
// fails.
func startLargeInstall(t *testing.T, g Gomega, dir, hubKubeconfig, hostsYAML, imageURL, imageSum string, onFail func()) *largeInstall {
	vip := fmt.Sprintf("127.%d.%d.10", 100+rand.IntN(100), rand.IntN(250))
	out, err := run(t, "create", "install-config", "--dir", dir, "--name", "e2e", "--api-vip", vip, "--masters", "1", "--workers", "1",
		"--hosts-from", hostsYAML, "--os-image-url", imageURL, "--os-image-checksum", imageSum)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	out, err = run(t, "create", "manifests", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	in := &largeInstall{dir: dir, big: strings.Repeat("0123456789abcdef", 72<<10/16), out: &syncBuffer{}, done: make(chan error, 1)}
	g.Expect(os.WriteFile(filepath.Join(dir, "openshift", "99_user.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-the-user\n  namespace: default\ndata:\n  big: "+in.big+"\n"), 0o600)).To(Succeed())
	create := exec.Command(metalshiftBin, "create", "cluster", "--dir", dir, "--kubeconfig", hubKubeconfig, "--timeout", "10m")
	create.Stdout, create.Stderr = in.out, in.out
	g.Expect(create.Start()).To(Succeed())
	go func() { in.done <- create.Wait() }()
	t.Cleanup(func() {
		_ = create.Process.Kill() // when it still runs
		<-in.done
		if t.Failed() {
			t.Logf("create cluster:\n%s", in.out)
			out, _ := kubectl(hubKubeconfig, "-n", "e2e", "get", "machines,metalmachines,bmh", "-o", "wide")
			t.Logf("hub:\n%s", out)
			onFail()
		}
	})
	return in
}

// wait waits for create cluster to succeed, and checks the installed
// cluster: two Nodes Ready, the user's manifest arrived whole.
func (in *largeInstall) wait(t *testing.T, g Gomega) {
	select {
	case err := <-in.done:
		in.done <- err // for the cleanup
		g.Expect(err).NotTo(HaveOccurred(), "%s", in.out)
	case <-time.After(11 * time.Minute):
		t.Fatalf("create cluster did not finish:\n%s", in.out)
	}
	t.Logf("create cluster:\n%s", in.out)
	g.Expect(in.out.String()).To(ContainSubstring("Reached install-complete"))
	admin := filepath.Join(in.dir, "auth", "kubeconfig")
	out, err := kubectl(admin, "get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, " Ready ")).To(Equal(2), "%s", out)
	out, err = kubectl(admin, "-n", "default", "get", "configmap", "from-the-user", "-o", "jsonpath={.data.big}")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(Equal(in.big), "the bootstrap node's served config arrived whole")
}

// waitMidProvisioning waits until the engine started to boot a host's
// deploy agent for its request (it records the start before it powers the
// host on) and the image is not reported written yet; it returns
// those hosts ("<host> <request>") and every host's state, for the log.
func waitMidProvisioning(g Gomega, hubc client.Client, createOut *syncBuffer) (midway, seen []string) {
	g.Eventually(func() []string {
		hosts := &metal3v1.BareMetalHostList{}
		if hubc.List(context.Background(), hosts, client.InNamespace("e2e")) != nil {
			return nil
		}
		midway, seen = nil, nil
		for _, h := range hosts.Items {
			if d := h.Status.DeployAgent; h.Status.Provisioning.State == metal3v1.StateProvisioning && d != nil && d.Request != nil &&
				d.Request.Action == deployapi.ActionDeploy && (d.Request.BootStartedAt != nil || d.Request.BootedAt != nil) &&
				(d.Report == nil || d.Report.Phase == deployapi.PhaseRunning) {
				midway = append(midway, h.Name+" "+d.Request.Generation)
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", h.Name, h.Status.Provisioning.State, agentState(h.Status.DeployAgent)))
		}
		return midway
	}, 5*time.Minute, 50*time.Millisecond).ShouldNot(BeEmpty(), "no host was seen being provisioned:\n%s", createOut)
	return midway, seen
}

// checkDiskWrites: no disk written twice. The deploy agent writes a host's
// disk once per provisioning request, here the bootstrap node's, the
// master's and the worker's (which may take the host the bootstrap node
// leaves, cleaned); the requests in progress at a kill (midway) were
// carried out. console is what the simulator printed with --console.
func checkDiskWrites(t *testing.T, g Gomega, console string, midway []string) {
	writes := map[string][]string{} // "<host> <request>" → disks written
	for _, m := range regexp.MustCompile(`(?m)^(\S+): Writing \S+ to (\S+) for request (\S+)$`).FindAllStringSubmatch(console, -1) {
		writes[m[1]+" "+m[3]] = append(writes[m[1]+" "+m[3]], m[2])
	}
	g.Expect(writes).To(HaveLen(3), "%v", writes)
	for req, disks := range writes {
		g.Expect(disks).To(Equal([]string{"/dev/sda"}), "%s: the image is written to the disk once", req)
	}
	for _, req := range midway {
		g.Expect(writes).To(HaveKey(req), "the request in progress at the kill was carried out")
		h, _, _ := strings.Cut(req, " ")
		var lines []string
		for _, l := range strings.Split(console, "\n") {
			if strings.HasPrefix(l, h+": ") {
				lines = append(lines, l)
			}
		}
		t.Logf("console of %s, provisioned across the kill:\n%s", h, strings.Join(lines, "\n"))
	}
}

// agentState sums a host's deploy agent status up for the test's log.
func agentState(d *metal3v1.DeployAgentStatus) string {
	switch {
	case d == nil || d.Request == nil:
		return "no request"
	case d.Report != nil:
		return fmt.Sprintf("%s reported %s", d.Request.Action, d.Report.Phase)
	case d.Request.BootedAt != nil:
		return d.Request.Action + " agent booted"
	case d.Request.BootStartedAt != nil:
		return d.Request.Action + " agent booting"
	}
	return d.Request.Action + " requested"
}

// replica is one `manager` process.
type replica struct {
	name, log                                                   string
	webhookPort, deployAddr, bootAddr, ignitionAddr, healthAddr string
	env                                                         []string // the process's environment; nil inherits the test's
	cmd                                                         *exec.Cmd
	done                                                        chan struct{}
}

func (r *replica) start(t *testing.T, bin string, args []string) {
	t.Helper()
	logs, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = r.env
	r.cmd.Stdout, r.cmd.Stderr = logs, logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs.Close()
	r.done = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
}

// acquiredLease: the replica logged that it leads (client-go's leader
// election logs it once per acquisition).
func (r *replica) acquiredLease() bool {
	data, _ := os.ReadFile(r.log)
	return strings.Contains(string(data), "Successfully acquired lease")
}

func (r *replica) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// serviceProxy stands in for a Kubernetes Service in front of manager
// replicas: each connection goes to the next backend that accepts it
// (round-robin), bytes pass through untouched (TLS included).
type serviceProxy struct {
	t     *testing.T
	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newServiceProxy(t *testing.T) *serviceProxy {
	p := &serviceProxy{t: t, conns: map[net.Conn]struct{}{}}
	t.Cleanup(p.close)
	return p
}

func (p *serviceProxy) serve(addr string, backends []string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.serveOn(ln, func() []string { return backends })
	return nil
}

// serveOn is serve on a listener, with the backends looked up for each
// connection (a Service's ready endpoints).
func (p *serviceProxy) serveOn(ln net.Listener, backends func() []string) {
	p.accept(ln, func(c net.Conn, next int) { p.forward(c, backends(), next) })
}

// accept hands each connection ln accepts, with its number, to handle,
// until close.
func (p *serviceProxy) accept(ln net.Listener, handle func(c net.Conn, next int)) {
	p.mu.Lock()
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for next := 0; ; next++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); handle(c, next) }()
		}
	}()
}

// serveConnect stands in for the cluster network kube-apiserver reaches
// Services through (localcp.Options.ServiceProxySocket): an HTTP CONNECT
// proxy on a Unix socket, asked for "<cluster IP>:<port>", which sends
// each connection on to the backends of that Service port, as kube-proxy
// would. A target without backends is answered 503.
func (p *serviceProxy) serveConnect(socket string, backends func(target string) []string) error {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	p.accept(ln, func(c net.Conn, next int) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil || req.Method != http.MethodConnect || br.Buffered() > 0 {
			c.Close()
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		to := backends(req.Host)
		if len(to) == 0 {
			p.t.Logf("service network: no backends for %s", req.Host)
			_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\n\r\n")
			c.Close()
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			c.Close()
			return
		}
		p.forward(c, to, next)
	})
	return nil
}

func (p *serviceProxy) forward(c net.Conn, backends []string, first int) {
	var b net.Conn
	for i := range backends {
		var err error
		if b, err = net.DialTimeout("tcp", backends[(first+i)%len(backends)], 5*time.Second); err == nil {
			break
		}
	}
	if b == nil || !p.track(c, b) {
		c.Close()
		if b != nil {
			b.Close()
		}
		return
	}
	// Whichever side closes first (a killed backend, a client done with
	// its connection) closes both.
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	c.Close()
	b.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
}

// track records live connections, so close can end them; false once closed.
func (p *serviceProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *serviceProxy) close() {
	p.mu.Lock()
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

func getOK(url string) error {
	resp, err := http.Get(url) //nolint:noctx // a test's loopback URL
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// replicatedHub is a hub started with `hub up --controllers=false` whose
// controllers and servers run in two `cmd/manager` replicas with
// --leader-elect, behind a stand-in for a Kubernetes Service (a TCP proxy
// on the hub's webhook, deploy, network boot, ignition and agent service
// ports, TLS passing through).
type replicatedHub struct {
	dir, kubeconfig string
	out             *syncBuffer
	client          client.Client
	replicas        [2]*replica
	// bin and args start a replica again (args[i] is replica i's).
	bin  string
	args [2][]string
}

func startReplicatedHub(t *testing.T, g Gomega, work, managerBin string) *replicatedHub {
	t.Helper()
	rh := &replicatedHub{dir: filepath.Join(work, "hub"), bin: managerBin}
	// A hub without controllers; it says how to run the manager against it.
	rh.out = startHub(t, rh.dir, "--controllers=false")
	var printed []string
	g.Eventually(func() []string {
		for _, line := range strings.Split(rh.out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "    manager "); ok {
				printed = strings.Fields(rest)
			}
		}
		return printed
	}, time.Minute).ShouldNot(BeEmpty(), "hub up prints the manager's command line:\n%s", rh.out)
	flags := map[string]string{}
	for _, a := range printed {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	rh.kubeconfig = flags["kubeconfig"]
	g.Expect(rh.kubeconfig).To(Equal(filepath.Join(rh.dir, "kubeconfig")))
	webhookAddr := "127.0.0.1:" + flags["webhook-port"]
	deployAddr, bootAddr, ignitionAddr := flags["deploy-listen-address"], flags["deploy-boot-listen-address"], flags["ignition-listen-address"]
	serviceAddr := flags["agent-service-listen-address"]
	out, err := run(t, "hub", "status", "--dir", rh.dir)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(ContainSubstring("Deploy:     https://"+deployAddr+" (network boot: http://"+bootAddr+")"), "hub up prints the ports hub status shows")
	g.Expect(out).To(ContainSubstring("Ignition:   https://" + ignitionAddr))
	out, err = kubectl(rh.kubeconfig, "create", "namespace", "metalshift-system")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	// Two replicas, each on ports of its own, behind the proxy on the hub's.
	// They are other processes: they are told reserved ports, which nothing
	// else binds before they do (internal/ports).
	var webhookBackends, deployBackends, bootBackends, ignitionBackends, serviceBackends []string
	for i := range rh.replicas {
		r := &replica{name: fmt.Sprintf("replica-%d", i), log: filepath.Join(work, fmt.Sprintf("replica-%d.log", i)),
			webhookPort: strings.TrimPrefix(testenv.ReservedAddr(t), "127.0.0.1:"),
			deployAddr:  testenv.ReservedAddr(t), bootAddr: testenv.ReservedAddr(t), ignitionAddr: testenv.ReservedAddr(t), healthAddr: testenv.ReservedAddr(t)}
		service := testenv.ReservedAddr(t)
		rh.args[i] = append(append([]string{}, printed...),
			"--webhook-port="+r.webhookPort, "--deploy-listen-address="+r.deployAddr, "--deploy-boot-listen-address="+r.bootAddr,
			"--ignition-listen-address="+r.ignitionAddr,
			"--deploy-url=https://"+deployAddr, "--deploy-boot-url=http://"+bootAddr, "--ignition-url=https://"+ignitionAddr,
			"--agent-service-listen-address="+service, "--agent-service-url=https://"+serviceAddr,
			"--console-listen-address="+testenv.ReservedAddr(t),
			"--metrics-bind-address=0", "--health-addr="+r.healthAddr,
			"--leader-elect", "--leader-election-namespace=metalshift-system")
		r.start(t, managerBin, rh.args[i])
		rh.replicas[i] = r
		webhookBackends = append(webhookBackends, "127.0.0.1:"+r.webhookPort)
		deployBackends = append(deployBackends, r.deployAddr)
		bootBackends = append(bootBackends, r.bootAddr)
		ignitionBackends = append(ignitionBackends, r.ignitionAddr)
		serviceBackends = append(serviceBackends, service)
	}
	proxy := newServiceProxy(t)
	g.Expect(proxy.serve(webhookAddr, webhookBackends)).To(Succeed())
	g.Expect(proxy.serve(deployAddr, deployBackends)).To(Succeed())
	g.Expect(proxy.serve(bootAddr, bootBackends)).To(Succeed())
	g.Expect(proxy.serve(ignitionAddr, ignitionBackends)).To(Succeed())
	g.Expect(proxy.serve(serviceAddr, serviceBackends)).To(Succeed())

	// Every replica serves webhooks and the servers (they do not need the
	// Lease); exactly one leads.
	for _, r := range rh.replicas {
		for _, addr := range []string{"127.0.0.1:" + r.webhookPort, r.deployAddr, r.ignitionAddr} {
			g.Eventually(func() error { return dial(addr) }, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "%s serves on %s", r.name, addr)
		}
		g.Eventually(func() error { return getOK("http://" + r.healthAddr + "/healthz") }, time.Minute, 200*time.Millisecond).Should(Succeed())
	}
	rh.client = hubClient(g, rh.kubeconfig)
	return rh
}

// leader waits for exactly one replica to lead and returns it and the other.
func (rh *replicatedHub) leader(g Gomega) (leader, follower *replica) {
	g.Eventually(func() []string {
		var leading []string
		for _, r := range rh.replicas {
			if r.running() && r.acquiredLease() {
				leading = append(leading, r.name)
				leader = r
			}
		}
		return leading
	}, 2*time.Minute, 200*time.Millisecond).Should(HaveLen(1), "one replica acquires the Lease")
	follower = rh.replicas[0]
	if leader == rh.replicas[0] {
		follower = rh.replicas[1]
	}
	return leader, follower
}

// restart starts replica i again, as a new process on the same ports (as
// a Deployment replaces a pod), with a fresh log.
func (rh *replicatedHub) restart(t *testing.T, i int) {
	t.Helper()
	r := rh.replicas[i]
	old, err := os.ReadFile(r.log)
	if err == nil {
		_ = os.WriteFile(fmt.Sprintf("%s.%d", r.log, time.Now().UnixNano()), old, 0o600)
	}
	r.start(t, rh.bin, rh.args[i])
}
