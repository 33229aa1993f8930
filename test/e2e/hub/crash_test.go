package hub

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/manager"
)

// killPoint is a moment of an install at which the hub is SIGKILLed.
type killPoint struct {
	name string
	// reached is true once the install is at the point.
	reached func(ctx context.Context, hub client.Client) bool
}

var killPoints = []killPoint{
	{name: "hosts provisioning", reached: func(ctx context.Context, hub client.Client) bool {
		hosts := &metal3v1.BareMetalHostList{}
		if hub.List(ctx, hosts, client.InNamespace("e2e")) != nil {
			return false
		}
		for _, h := range hosts.Items {
			if h.Status.Provisioning.State == metal3v1.StateProvisioning && h.Status.DeployAgent != nil &&
				h.Status.DeployAgent.Request != nil && h.Status.DeployAgent.Request.BootedAt != nil {
				return true // the deploy agent was booted: mid-provisioning
			}
		}
		return false
	}},
	{name: "bootstrap node serving", reached: func(ctx context.Context, hub client.Client) bool {
		cps := &controlplanev1.OpenShiftControlPlaneList{}
		if hub.List(ctx, cps, client.InNamespace("e2e")) != nil || len(cps.Items) == 0 {
			return false
		}
		for _, c := range cps.Items[0].Status.Conditions {
			if c.Type == controlplanev1.BootstrapReadyCondition && c.Status == metav1.ConditionTrue {
				return true
			}
		}
		return false
	}},
	{name: "bootstrap node being removed", reached: func(ctx context.Context, hub client.Client) bool {
		machines := &clusterv1.MachineList{}
		if hub.List(ctx, machines, client.InNamespace("e2e")) != nil {
			return false
		}
		for _, m := range machines.Items {
			if strings.Contains(m.Name, "bootstrap") && !m.DeletionTimestamp.IsZero() {
				return true
			}
		}
		return false
	}},
}

// TestHubKilledMidInstallResumes: the embedded hub (the `hub up` process
// `create cluster` started in the background, and its etcd,
// kube-apiserver and kube-controller-manager) is SIGKILLed at three points
// of an install, with `create cluster` itself, as when the hub's machine
// dies; `hub up` on the same directory and `wait-for install-complete` then
// finish it. Every piece of state the controllers need is in the hub's API,
// so nothing is lost with the process. 1 master + 1 worker (and the
// bootstrap node) on 3 hosts.
func TestHubKilledMidInstallResumes(t *testing.T) {
	t.Parallel()
	for _, kp := range killPoints {
		t.Run(strings.ReplaceAll(kp.name, " ", "-"), func(t *testing.T) { killAndResume(t, kp) })
	}
}

func killAndResume(t *testing.T, kp killPoint) {
	g := NewWithT(t)
	hostsYAML, imageURL, imageSum, _ := startSimWith(t, 3, "--password", bmcPasswordCanary)
	dir := t.TempDir()
	hubDir := filepath.Join(dir, "hub")
	var resumed *exec.Cmd
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(filepath.Join(hubDir, "kubeconfig"), "-n", "e2e", "get", "machines,metalmachines,bmh", "-o", "wide")
			t.Logf("hub:\n%s", out)
			out, _ = kubectl(filepath.Join(dir, "auth", "kubeconfig"), "get", "nodes,clusteroperators", "-o", "wide")
			t.Logf("installed cluster:\n%s", out)
			if data, err := os.ReadFile(filepath.Join(hubDir, "logs", "manager.log")); err == nil && len(data) > 20000 {
				t.Logf("manager.log (tail):\n%s", data[len(data)-20000:])
			}
		}
		_, _ = run(t, "hub", "down", "--dir", hubDir)
		if resumed != nil {
			_ = resumed.Wait()
		}
	})
	vip := fmt.Sprintf("127.%d.%d.10", 100+rand.IntN(100), rand.IntN(250))
	out, err := run(t, "create", "install-config", "--dir", dir, "--name", "e2e", "--api-vip", vip, "--masters", "1", "--workers", "1",
		"--hosts-from", hostsYAML, "--os-image-url", imageURL, "--os-image-checksum", imageSum)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	// The pull secret as a person pastes it: block-style YAML, which a
	// line-based redaction once missed.
	icPath := filepath.Join(dir, "install-config.yaml")
	ic, err := os.ReadFile(icPath)
	g.Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(string(ic), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pullSecret:") {
			lines[i] = "pullSecret: |\n  {\"auths\":{\"quay.io\":{\"auth\":\"" + pullSecretCanary + "\"}}}"
		}
	}
	g.Expect(os.WriteFile(icPath, []byte(strings.Join(lines, "\n")), 0o600)).To(Succeed())
	g.Expect(strings.Join(lines, "\n")).To(ContainSubstring(pullSecretCanary))

	create := exec.Command(metalshiftBin, "create", "cluster", "--dir", dir, "--timeout", "8m")
	createOut := &syncBuffer{}
	create.Stdout, create.Stderr = createOut, createOut
	g.Expect(create.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() { _ = create.Wait(); close(exited) }()
	t.Cleanup(func() { _ = create.Process.Kill(); <-exited })

	hub := hubClient(g, filepath.Join(hubDir, "kubeconfig"))
	g.Eventually(func() bool { return kp.reached(context.Background(), hub) }, 5*time.Minute, 100*time.Millisecond).Should(BeTrue(),
		"the install did not reach %q:\n%s", kp.name, createOut)
	g.Expect(create.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Eventually(exited, time.Minute).Should(BeClosed())
	killHub(g, hubDir)
	t.Logf("SIGKILLed the hub and create cluster at %q; create cluster had printed:\n%s", kp.name, createOut)

	resumed = exec.Command(metalshiftBin, "hub", "up", "--dir", hubDir)
	resumedOut := &syncBuffer{}
	resumed.Stdout, resumed.Stderr = resumedOut, resumedOut
	g.Expect(resumed.Start()).To(Succeed())
	out, err = run(t, "hub", "status", "--dir", hubDir, "--wait", "3m")
	g.Expect(err).NotTo(HaveOccurred(), "%s\n%s", out, resumedOut)

	out, err = run(t, "wait-for", "install-complete", "--dir", dir, "--timeout", "6m")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(out).To(ContainSubstring("Reached install-complete"))
	out, err = kubectl(filepath.Join(dir, "auth", "kubeconfig"), "get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, " Ready ")).To(Equal(2), "%s", out)

	// No BMC password and no pull secret in any object of the installed
	// cluster, nor in what the hub logged.
	admin := filepath.Join(dir, "auth", "kubeconfig")
	kinds, err := kubectl(admin, "api-resources", "--verbs=list", "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), "%s", kinds)
	all, err := kubectl(admin, "get", strings.Join(strings.Fields(kinds), ","), "-A", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), "%s", all)
	g.Expect(all).To(ContainSubstring("cluster-config-v1"), "the dump holds the installed cluster's ConfigMaps")
	for _, canary := range []string{bmcPasswordCanary, pullSecretCanary} {
		g.Expect(all).NotTo(ContainSubstring(canary), "a secret of the hub is in the installed cluster")
		g.Expect(createOut.String() + resumedOut.String()).NotTo(ContainSubstring(canary))
		logs, _ := filepath.Glob(filepath.Join(hubDir, "logs", "*"))
		logs = append(logs, filepath.Join(hubDir, "hub.log"))
		for _, f := range logs {
			data, _ := os.ReadFile(f)
			g.Expect(string(data)).NotTo(ContainSubstring(canary), "%s holds a secret", f)
		}
	}
}

// killHub SIGKILLs the hub running in hubDir (the process hub.json names,
// which holds the directory's lock; its children die with it) and waits
// until the kernel has released the lock. `create cluster` starts the hub
// as a process of its own: killing `create cluster` leaves the hub running.
func killHub(g Gomega, hubDir string) {
	g.Expect(localcp.Running(hubDir)).To(BeTrue(), "no hub runs in %s", hubDir)
	st, err := localcp.ReadState(hubDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.PID).NotTo(BeZero())
	g.Expect(syscall.Kill(st.PID, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() bool { return localcp.Running(hubDir) }, time.Minute, 50*time.Millisecond).Should(BeFalse(),
		"the hub (pid %d) still holds its directory after SIGKILL", st.PID)
}

// Canary secrets: they must never leave the hub nor reach a log.
const (
	bmcPasswordCanary = "Canary-BMC-pa55-7f3e"
	pullSecretCanary  = "Q0FOQVJZLXB1bGwtc2VjcmV0LTQ0Mg"
)

// hubClient connects to the hub whose kubeconfig will appear at path.
func hubClient(g Gomega, kubeconfig string) client.Client {
	g.Eventually(func() error { _, err := os.Stat(kubeconfig); return err }, 3*time.Minute).Should(Succeed())
	var hub client.Client
	g.Eventually(func() error {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		scheme, _ := manager.NewScheme()
		hub, err = client.New(cfg, client.Options{Scheme: scheme})
		return err
	}, 3*time.Minute).Should(Succeed())
	return hub
}
