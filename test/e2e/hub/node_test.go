package hub

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/ociimage"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/manager"
	"github.com/metalshift/metalshift/manager/providers"
)

// The real node's networks. Pods get addresses on a bridge, nodeBridge,
// whose gateway address is the host's; the cluster IP of the hub's
// `kubernetes` Service (localcp.KubernetesServiceIP) is an address of the
// host too, on its loopback link (labelled nodeServiceLabel), where the
// test forwards to the hub's kube-apiserver: what kube-proxy does for that
// Service on a real node.
const (
	nodeBridge       = "msnode0"
	nodeSubnet       = "10.244.0.0/24"
	nodeGateway      = "10.244.0.1"
	nodeServiceLabel = "lo:msnode"
	// pauseImage is the pods' sandbox image, built by the test from
	// test/e2e/pause.
	pauseImage = "localhost/metalshift-e2e/pause:1"
)

// kubeletSysctls are the kernel settings the kubelet (setupKernelTunables)
// and the CNI bridge (ip_forward) change; the test puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"}

// nodeHostDirs are where a kubelet and containerd write whatever their
// configuration says (the device plugins' socket, the CNI results, the
// shims' sockets); the test removes those it created.
var nodeHostDirs = []string{"/var/lib/kubelet", "/var/lib/cni", "/run/containerd"}

// TestNode runs metalshift's container image on a real Kubernetes node:
// Debian's containerd and runc with the CNI plugins, and a kubelet and
// kube-scheduler built from the module proxy (hack/tools/build.sh), joined
// to a fresh hub whose kube-controller-manager also runs the workload
// controllers. metalshift is installed with clusterctl init as
// docs/production.md says, and the node runs every provider's Deployment
// unchanged, from the OCI layout `make images` wrote (imported into
// containerd): each becomes Available through its probes, each provider
// elects one leader among its pods, the hub reaches the webhooks through
// the Services' EndpointSlices (an invalid BareMetalHost is refused by
// the webhook of the metal provider's pods). Then the host engine in those
// pods registers, inspects and provisions simulated machines whose BMCs
// listen on the pod network's gateway; the container of the metal
// provider's leader is SIGKILLed mid-provisioning, the kubelet restarts
// it, a new leader finishes, and the disk is written once.
//
// It runs before the parallel tests and needs root (a kubelet mounts,
// makes cgroups and network namespaces); without root, or on a machine
// whose addresses or file systems a node here would clash with, it is
// skipped, saying why.
func TestNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a kubelet and containerd need root: run the tests as root (CI does)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	work := t.TempDir()
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip"} {
		_, err := exec.LookPath(b)
		g.Expect(err).NotTo(HaveOccurred(), "apt-get install containerd runc iproute2 (.ci/run)")
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		_, err := os.Stat(filepath.Join("/usr/lib/cni", p))
		g.Expect(err).NotTo(HaveOccurred(), "apt-get install containernetworking-plugins (.ci/run)")
	}
	for _, b := range []string{"kubelet", "kube-scheduler", "clusterctl"} {
		_, err := os.Stat(filepath.Join(toolsDir, b))
		g.Expect(err).NotTo(HaveOccurred(), "build it with `make tools` (hack/tools/build.sh %s)", b)
	}
	managerLayout := filepath.Join(os.Getenv("METALSHIFT_IMAGES_DIR"), "oci", "manager")
	_, err := os.Stat(filepath.Join(managerLayout, "index.json"))
	g.Expect(err).NotTo(HaveOccurred(), "the manager's image: build it with make images (METALSHIFT_IMAGES_DIR)")
	nodePreflight(t, g)

	// A fresh hub with the controllers a node's Deployments need.
	serviceNetwork := filepath.Join(work, "services.sock")
	hub, hubc := startServiceHub(t, g, localcp.Options{Dir: filepath.Join(work, "hub"), ServiceProxySocket: serviceNetwork,
		Controllers: []string{"deployment-controller", "replicaset-controller", "endpointslice-controller", "node-lifecycle-controller"}})
	kubeconfig := hub.Kubeconfig()

	n := startNode(t, g, hub, managerLayout)
	started := time.Now()

	// The service network: kube-apiserver reaches the webhook Services,
	// and the machines the servers' Services, through their ready
	// endpoints, as kube-proxy and a load balancer would.
	cc := clusterctlInit(t, g, ctx, hubc, kubeconfig, work)
	proxy := newServiceProxy(t)
	g.Expect(proxy.serveConnect(serviceNetwork, func(target string) []string { return clusterIPEndpoints(ctx, hubc, target) })).To(Succeed())
	for _, p := range providers.All() {
		for _, s := range p.Servers {
			g.Expect(cc.vars.lbs).To(HaveKey(s.Name))
			proxy.serveOn(cc.vars.lbs[s.Name], func() []string {
				return serviceEndpoints(ctx, hubc, p.Namespace(), "metalshift-"+s.Name, s.Name)
			})
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(kubeconfig, "get", "nodes,pods,deployments,endpointslices", "-A", "-o", "wide")
			t.Logf("hub:\n%s", out)
			n.logPods(t)
		}
	})

	// Every provider's Deployment becomes Available on the node, each
	// with one leader among its pods.
	for _, p := range providers.All() {
		g.Eventually(func() error {
			d := &appsv1.Deployment{}
			if err := hubc.Get(ctx, client.ObjectKey{Namespace: p.Namespace(), Name: providers.DeploymentName}, d); err != nil {
				return err
			}
			if d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
				return fmt.Errorf("%s: %d of %d replicas available", p.Label(), d.Status.AvailableReplicas, *d.Spec.Replicas)
			}
			return nil
		}, 5*time.Minute, time.Second).Should(Succeed())
		g.Eventually(func() (string, error) { return leaderPod(ctx, hubc, p.Namespace()) }, 2*time.Minute, time.Second).ShouldNot(BeEmpty(), "%s elects a leader", p.Label())
	}
	t.Logf("every provider's Deployment available on the real node %s after clusterctl init", time.Since(started).Round(time.Second))

	// The metal provider's validating webhook, served by its pods.
	metal := providers.All()[1]
	g.Expect(metal.Label()).To(Equal("infrastructure-metal"))
	g.Expect(hubc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}})).To(Succeed())
	bad := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "e2e"}, Spec: metal3v1.BareMetalHostSpec{
		BMC:   metal3v1.BMCDetails{Address: "redfish+http://127.0.0.1/redfish/v1/Systems/1", CredentialsName: "bad"},
		Image: &metal3v1.Image{URL: "ftp://images.example.com/os.raw", Checksum: "0"},
	}}
	err = hubc.Create(ctx, bad)
	g.Expect(err).To(MatchError(ContainSubstring("spec.image.url")), "the webhook in the pods refuses it, naming the field")
	g.Expect(err).To(MatchError(ContainSubstring("unsupported scheme")))

	// Machines whose BMCs the pods reach on the gateway of their network.
	hostsYAML, imageURL, imageSum, console := startSimWith(t, 2, "--console", "--listen", nodeGateway+":0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("simulator:\n%s", tail(console.String(), 20000))
		}
	})
	out, err := kubectl(kubeconfig, "apply", "-f", hostsYAML)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(func() []string { return hostStates(ctx, hubc) }, 5*time.Minute, time.Second).Should(
		HaveEach(HaveSuffix(" "+string(metal3v1.StateAvailable))), "the host engine in the pods inspects the machines")

	// One is provisioned; once its deploy agent booted, the container of
	// the metal provider's leader is SIGKILLed: the kubelet restarts it,
	// and a new leader (that pod's new process or the other pod) finishes.
	host := &metal3v1.BareMetalHost{}
	g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: "e2e", Name: "host-0"}, host)).To(Succeed())
	host.Spec.Image = &metal3v1.Image{URL: imageURL, Checksum: imageSum, ChecksumType: metal3v1.SHA256}
	host.Spec.Online = true
	g.Expect(hubc.Update(ctx, host)).To(Succeed())
	midway, seen := waitMidProvisioning(g, hubc, &syncBuffer{})
	leader, err := leaderPod(ctx, hubc, metal.Namespace())
	g.Expect(err).NotTo(HaveOccurred())
	lease := &coordinationv1.Lease{}
	g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: metal.Namespace(), Name: manager.Name}, lease)).To(Succeed())
	holder := *lease.Spec.HolderIdentity
	pod := &corev1.Pod{}
	g.Expect(hubc.Get(ctx, client.ObjectKey{Namespace: metal.Namespace(), Name: leader}, pod)).To(Succeed())
	g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
	container := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err = n.ctr("tasks", "kill", "--signal", "SIGKILL", container)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	t.Logf("SIGKILLed the container of %s, the metal provider's leader, mid-provisioning; hosts: %s", leader, strings.Join(seen, "; "))
	g.Eventually(func() (int32, error) {
		err := hubc.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		if err != nil || len(pod.Status.ContainerStatuses) == 0 {
			return 0, err
		}
		return pod.Status.ContainerStatuses[0].RestartCount, nil
	}, 2*time.Minute, time.Second).Should(BeNumerically(">=", 1), "the kubelet restarts the container")
	g.Eventually(func() (string, error) {
		err := hubc.Get(ctx, client.ObjectKeyFromObject(lease), lease)
		if err != nil || lease.Spec.HolderIdentity == nil {
			return "", err
		}
		return *lease.Spec.HolderIdentity, nil
	}, 2*time.Minute, time.Second).ShouldNot(Or(BeEmpty(), Equal(holder)), "a new leader takes the Lease over")
	g.Eventually(func() []string { return hostStates(ctx, hubc) }, 5*time.Minute, time.Second).Should(
		ContainElement("host-0 "+string(metal3v1.StateProvisioned)), "the new leader finishes the provisioning")
	writes := 0
	for _, l := range strings.Split(console.String(), "\n") {
		if strings.HasPrefix(l, "host-0: Writing ") {
			writes++
		}
	}
	g.Expect(writes).To(Equal(1), "the disk is written once:\n%s", console)
	g.Expect(midway).To(HaveLen(1))

	// The ServiceAccounts' RBAC let every pod do what it did.
	logs := n.podLogs(t)
	g.Expect(logs).NotTo(BeEmpty())
	for name, log := range logs {
		g.Expect(log).NotTo(ContainSubstring("forbidden"), "%s: its ClusterRole lacks a permission", name)
	}
}

// nodePreflight removes what an earlier run killed before its cleanup left
// (the labelled address, the bridge), and skips the test where a node
// would clash with the machine: its networks in use, or a temporary
// directory on overlayfs, where containerd's overlay snapshotter fails.
func nodePreflight(t *testing.T, g Gomega) {
	out, err := exec.Command("ip", "-4", "-o", "address", "show").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	if strings.Contains(string(out), nodeServiceLabel) {
		_ = exec.Command("ip", "address", "delete", localcp.KubernetesServiceIP+"/32", "dev", "lo").Run()
	}
	_ = exec.Command("ip", "link", "delete", nodeBridge).Run()
	addrs, err := exec.Command("ip", "-4", "-o", "address", "show").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", addrs)
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", routes)
	for _, prefix := range []string{localcp.KubernetesServiceIP + "/", "10.244.0."} {
		if strings.Contains(string(addrs), " "+prefix) || strings.Contains(string(routes), prefix) {
			t.Skipf("this machine uses %s*, which the node's networks need (%s for pods, %s for the kubernetes Service):\n%s%s",
				prefix, nodeSubnet, localcp.KubernetesServiceIP, addrs, routes)
		}
	}
	var st syscall.Statfs_t
	g.Expect(syscall.Statfs(os.TempDir(), &st)).To(Succeed())
	if st.Type == 0x794c7630 { // OVERLAYFS_SUPER_MAGIC
		t.Skipf("%s is on overlayfs, where containerd's overlay snapshotter fails: set TMPDIR to another file system", os.TempDir())
	}
}

// leaderPod is the pod holding the provider's Lease in ns; the identity
// of a controller-runtime leader starts with its host name, a pod's name.
func leaderPod(ctx context.Context, hubc client.Client, ns string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := hubc.Get(ctx, client.ObjectKey{Namespace: ns, Name: manager.Name}, lease); err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "", nil
	}
	pods := &corev1.PodList{}
	if err := hubc.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(*lease.Spec.HolderIdentity, p.Name+"_") && p.Status.Phase == corev1.PodRunning {
			return p.Name, nil
		}
	}
	return "", fmt.Errorf("no running pod holds the Lease (%s)", *lease.Spec.HolderIdentity)
}

func hostStates(ctx context.Context, hubc client.Client) []string {
	hosts := &metal3v1.BareMetalHostList{}
	if hubc.List(ctx, hosts, client.InNamespace("e2e")) != nil {
		return nil
	}
	var states []string
	for _, h := range hosts.Items {
		states = append(states, h.Name+" "+string(h.Status.Provisioning.State))
	}
	return states
}

// clusterIPEndpoints are the ready endpoints behind "<cluster IP>:<port>";
// what is no Service's is reached directly.
func clusterIPEndpoints(ctx context.Context, hubc client.Client, target string) []string {
	svc, port, err := serviceOf(ctx, hubc, target)
	switch {
	case err != nil:
		return nil
	case svc == nil:
		return []string{target}
	}
	return serviceEndpoints(ctx, hubc, svc.Namespace, svc.Name, port.Name)
}

// serviceEndpoints are the ready endpoints of the Service's port, from its
// EndpointSlices, as kube-proxy reads them.
func serviceEndpoints(ctx context.Context, hubc client.Client, ns, service, port string) []string {
	eps := &discoveryv1.EndpointSliceList{}
	if hubc.List(ctx, eps, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service}) != nil {
		return nil
	}
	var addrs []string
	for _, s := range eps.Items {
		for _, p := range s.Ports {
			if p.Name == nil || *p.Name != port || p.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					addrs = append(addrs, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
				}
			}
		}
	}
	return addrs
}

// node is a Kubernetes node on this machine, named localhost.
type node struct {
	dir, socket, podLogsDir string
	procs                   []*exec.Cmd // containerd, kubelet, kube-scheduler
	serviceIPAdded          bool
	// sysctls are the kernel's settings before the kubelet started.
	sysctls map[string]string
	// newHostDirs are the nodeHostDirs that were not there.
	newHostDirs []string
}

// startNode starts containerd with the pods' images, a kubelet and a
// kube-scheduler against the hub, and waits for the node to be Ready and
// schedulable. The cleanup stops the pods, the processes, and removes what
// they left on the machine (mounts, network namespaces, links, cgroups).
func startNode(t *testing.T, g Gomega, hub *localcp.Hub, managerLayout string) *node {
	// A short directory: containerd's sockets must fit sun_path.
	dir, err := os.MkdirTemp("", "msnode")
	g.Expect(err).NotTo(HaveOccurred())
	n := &node{dir: dir, socket: filepath.Join(dir, "containerd.sock"), podLogsDir: filepath.Join(dir, "pod-logs"), sysctls: map[string]string{}}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			n.sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, d := range nodeHostDirs {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			n.newHostDirs = append(n.newHostDirs, d)
		}
	}
	t.Cleanup(func() { n.stop(t, hub) })

	// The kubernetes Service's cluster IP, forwarded to the hub.
	out, err := exec.Command("ip", "address", "add", localcp.KubernetesServiceIP+"/32", "dev", "lo", "label", nodeServiceLabel).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "ip address add %s/32 dev lo: %s", localcp.KubernetesServiceIP, out)
	n.serviceIPAdded = true
	apiServer := strings.TrimPrefix(hub.Server(), "https://")
	proxy := newServiceProxy(t)
	g.Expect(proxy.serve(net.JoinHostPort(localcp.KubernetesServiceIP, "443"), []string{apiServer})).To(Succeed())

	// containerd, its CNI configuration, and the images.
	g.Expect(os.MkdirAll(filepath.Join(dir, "net.d"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "net.d", "10-pods.conflist"), []byte(fmt.Sprintf(`{
  "cniVersion": "1.0.0", "name": "metalshift-e2e",
  "plugins": [{"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}}]
}`, nodeBridge, filepath.Join(dir, "ipam"), nodeSubnet, nodeGateway)), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "net.d", "99-loopback.conf"), []byte(`{"cniVersion": "1.0.0", "name": "lo", "type": "loopback"}`), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "containerd.toml"), []byte(fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # The pods' network namespaces below state, not in /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # Without CAP_SYS_RESOURCE (a container) the OOM score cannot be lowered.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.socket, filepath.Join(dir, "opt"), pauseImage,
		filepath.Join(dir, "runc"), filepath.Join(dir, "net.d"))), 0o644)).To(Succeed())
	n.start(t, g, "containerd", "containerd", "--config", filepath.Join(dir, "containerd.toml"))
	g.Eventually(func() error { _, err := n.ctr("version"); return err }, time.Minute, 200*time.Millisecond).Should(Succeed(), "containerd answers")
	pause := filepath.Join(dir, "pause.tar")
	g.Expect(writePauseImage(dir, pause)).To(Succeed())
	manager := filepath.Join(dir, "manager.tar")
	g.Expect(tarDir(managerLayout, manager)).To(Succeed())
	for _, img := range []string{pause, manager} {
		out, err := n.ctr("images", "import", "--all-platforms", img)
		g.Expect(err).NotTo(HaveOccurred(), "ctr images import %s: %s", img, out)
	}
	images, err := n.ctr("images", "list", "--quiet")
	g.Expect(err).NotTo(HaveOccurred(), "%s", images)
	g.Expect(strings.Fields(images)).To(ContainElement(providers.DefaultImage(ccVersion)),
		"the components run %s: build that image with make images VERSION=%s", providers.DefaultImage(ccVersion), ccVersion)

	// The kubelet and the scheduler.
	healthzPort := freePort(t)
	g.Expect(os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /
containerRuntimeEndpoint: unix://%s
failSwapOn: false
# Nothing calls the kubelet's API (logs, exec): it stays off.
enableServer: false
healthzBindAddress: 127.0.0.1
healthzPort: %s
readOnlyPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
podLogsDir: %s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "0%%", nodefs.available: "0%%", imagefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.inodesFree: "0%%"}
makeIPTablesUtilChains: false
`, n.socket, healthzPort, n.podLogsDir)), 0o644)).To(Succeed())
	n.start(t, g, "kubelet", filepath.Join(toolsDir, "kubelet"), "--config", filepath.Join(dir, "kubelet.yaml"), "--kubeconfig", hub.Kubeconfig(),
		"--root-dir", filepath.Join(dir, "kubelet"), "--cert-dir", filepath.Join(dir, "kubelet", "pki"), "--hostname-override", "localhost", "--v=1")
	n.start(t, g, "kube-scheduler", filepath.Join(toolsDir, "kube-scheduler"), "--kubeconfig", hub.Kubeconfig(),
		"--authentication-kubeconfig", hub.Kubeconfig(), "--authorization-kubeconfig", hub.Kubeconfig(),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
	g.Eventually(func() string {
		out, _ := kubectl(hub.Kubeconfig(), "get", "node", "localhost", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out
	}, 3*time.Minute, time.Second).Should(Equal("True"), "the node becomes Ready; kubelet:\n%s", func() string { return tail(n.log("kubelet"), 8000) })
	g.Eventually(func() string {
		out, _ := kubectl(hub.Kubeconfig(), "get", "node", "localhost", "-o", "jsonpath={.spec.taints}")
		return out
	}, 2*time.Minute, time.Second).Should(BeEmpty(), "the node is schedulable")
	return n
}

func (n *node) start(t *testing.T, g Gomega, name, bin string, args ...string) {
	log, err := os.Create(filepath.Join(n.dir, name+".log"))
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, n.dir
	// Killed with the test binary (a timeout, ^C), before any cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	g.Expect(localcp.Spawn(cmd)).To(Succeed(), name)
	log.Close()
	n.procs = append(n.procs, cmd)
	t.Logf("node: started %s (pid %d)", name, cmd.Process.Pid)
}

func (n *node) log(name string) string {
	data, _ := os.ReadFile(filepath.Join(n.dir, name+".log"))
	return string(data)
}

func (n *node) ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	return string(out), err
}

// podLogs are the containers' logs the kubelet wrote, by file.
func (n *node) podLogs(t *testing.T) map[string]string {
	logs := map[string]string{}
	_ = filepath.WalkDir(n.podLogsDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Logf("%s: %v", path, err)
				return nil
			}
			logs[strings.TrimPrefix(path, n.podLogsDir+"/")] = string(data)
		}
		return nil
	})
	return logs
}

func (n *node) logPods(t *testing.T) {
	for name, log := range n.podLogs(t) {
		var errs []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, `"level":"error"`) {
				errs = append(errs, tail(l, 1000))
			}
		}
		t.Logf("%s: %d error lines, the first:\n%s\ntail:\n%s", name, len(errs), strings.Join(errs[:min(len(errs), 5)], "\n"), tail(log, 4000))
	}
	for _, name := range []string{"containerd", "kubelet", "kube-scheduler"} {
		t.Logf("%s log (tail):\n%s", name, tail(n.log(name), 6000))
	}
}

// stop deletes the pods (the kubelet stops their containers and their
// sandboxes, which removes their network namespaces), stops the processes,
// and removes whatever is left: containers, mounts, network namespaces,
// links and the kubelet's cgroups.
func (n *node) stop(t *testing.T, hub *localcp.Hub) {
	kc := hub.Kubeconfig()
	if out, err := kubectl(kc, "delete", "deployments", "--all", "--all-namespaces", "--cascade=foreground", "--timeout=90s"); err != nil {
		t.Logf("node: deleting the Deployments: %v: %s", err, out)
	}
	if out, err := kubectl(kc, "delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--timeout=90s"); err != nil {
		t.Logf("node: deleting the pods: %v: %s", err, out)
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		if filepath.Base(p.Path) == "containerd" {
			// Containers the kubelet left: their shims outlive containerd.
			out, _ := n.ctr("tasks", "list", "--quiet")
			for _, id := range strings.Fields(out) {
				_, _ = n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
			}
			time.Sleep(time.Second)
			for _, id := range strings.Fields(out) {
				if out, err := n.ctr("tasks", "delete", "--force", id); err != nil {
					t.Logf("node: deleting task %s: %v: %s", id, err, out)
				}
			}
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	// Shims of containers containerd did not stop.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, _ := os.ReadFile(p)
		if strings.Contains(string(cmdline), "containerd-shim") && strings.Contains(string(cmdline), n.socket) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				t.Logf("node: killing shim %d", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// Mounts below the node's directory, the deepest first.
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], n.dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("node: unmount %s: %v", m, err)
		}
	}
	_ = exec.Command("ip", "link", "delete", nodeBridge).Run()
	if n.serviceIPAdded {
		if out, err := exec.Command("ip", "address", "delete", localcp.KubernetesServiceIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Logf("node: ip address delete: %v: %s", err, out)
		}
	}
	for k, v := range n.sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			t.Logf("node: restoring %s: %v", k, err)
		}
	}
	for _, d := range n.newHostDirs {
		if err := os.RemoveAll(d); err != nil {
			t.Logf("node: %v", err)
		}
	}
	// The kubelet's cgroups (cgroupRoot /), in every hierarchy.
	for _, top := range append(globDirs("/sys/fs/cgroup/*/kubepods"), globDirs("/sys/fs/cgroup/kubepods")...) {
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Logf("node: %v", err)
			}
		}
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Logf("node: %v", err)
	}
}

func globDirs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

// freePort returns a port reserved for the test (internal/ports), for a
// server of another process (the kubelet) that must be told it.
func freePort(t *testing.T) string {
	_, port, _ := net.SplitHostPort(testenv.ReservedAddr(t))
	return port
}

// writePauseImage builds test/e2e/pause into an image named pauseImage, as
// an OCI layout in a tar file, which `ctr images import` reads.
func writePauseImage(dir, tarFile string) error {
	bin := filepath.Join(dir, "pause")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause program: %w: %s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	idx, err := ociimage.Build(ociimage.Spec{
		Reference: pauseImage, Created: time.Unix(0, 0),
		Config: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		Platforms: []ociimage.Platform{{Platform: v1.Platform{OS: "linux", Architecture: goruntime.GOARCH},
			Files: []ociimage.File{{Path: "pause", Mode: 0o755, Data: data}}}},
	})
	if err != nil {
		return err
	}
	layout := filepath.Join(dir, "pause-layout")
	if _, err := ociimage.Write(layout, pauseImage, idx); err != nil {
		return err
	}
	return tarDir(layout, tarFile)
}

// tarDir writes the files below dir into a tar file, named relative to dir.
func tarDir(dir, tarFile string) error {
	f, err := os.Create(tarFile)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
