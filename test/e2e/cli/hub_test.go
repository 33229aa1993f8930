package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/localcp"
)

// These tests drive the real binary the way a user does, with the real
// kubectl, and check that stopping the hub by every path leaves no child
// process behind.

var (
	metalshiftBin string
	toolsDir      string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		tmp, err := os.MkdirTemp("", "metalshift-cli-")
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
		return m.Run()
	}())
}

// hubProcess is a `metalshift hub up` running in the background.
type hubProcess struct {
	dir  string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
}

func hubUp(t *testing.T, dir string) *hubProcess {
	t.Helper()
	h := &hubProcess{dir: dir, out: &bytes.Buffer{}, done: make(chan error, 1)}
	h.cmd = exec.Command(metalshiftBin, "hub", "up", "--dir", dir, "--bin-dir", toolsDir)
	h.cmd.Stdout, h.cmd.Stderr = h.out, h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			<-h.done
		}
		if t.Failed() {
			t.Logf("hub up output:\n%s", h.out)
		}
	})
	out, err := metalshift(t, "hub", "status", "--dir", dir, "--wait", "3m")
	if err != nil {
		t.Fatalf("hub did not become ready: %v\n%s\nhub up output:\n%s", err, out, h.out)
	}
	return h
}

func (h *hubProcess) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(timeout):
		t.Fatalf("hub up did not exit within %s; output:\n%s", timeout, h.out)
		return nil
	}
}

func metalshift(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(metalshiftBin, args...).CombinedOutput()
	return string(out), err
}

func kubectl(t *testing.T, dir string, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(toolsDir, "kubectl"), append([]string{"--kubeconfig", localcp.KubeconfigPath(dir)}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func childPIDs(t *testing.T, dir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	var pids []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		t.Fatalf("want 3 children (etcd, kube-apiserver, kube-controller-manager), found %v", pids)
	}
	return pids
}

func expectGone(g Gomega, pids []int) {
	for _, pid := range pids {
		g.Eventually(func() bool { return localcp.Alive(pid) }, 15*time.Second, 50*time.Millisecond).
			Should(BeFalse(), "child %d outlived the hub", pid)
	}
}

// TestHubUpUseDown is the acceptance path: hub up, kubectl against it
// (CRDs, Cluster API webhooks, the agent service's discovery ISO), a second
// hub up refused, hub down.
func TestHubUpUseDown(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	h := hubUp(t, dir)
	pids := childPIDs(t, dir)

	out, err := kubectl(t, dir, "", "get", "crds", "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/clusters.cluster.x-k8s.io"))
	g.Expect(out).To(ContainSubstring("customresourcedefinition.apiextensions.k8s.io/machines.cluster.x-k8s.io"))

	// Cluster API's validating webhook runs in-process: a topology Cluster
	// is refused while the ClusterTopology feature is off.
	out, err = kubectl(t, dir, topologyCluster, "apply", "-f", "-")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("spec.topology: Forbidden: can be set only if the ClusterTopology feature flag is enabled"))

	// The agent service runs: an InfraEnv gets a discovery ISO served at
	// the address `hub status` and `hub up` print, over https with a
	// certificate of the hub CA.
	out, err = metalshift(t, "hub", "status", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), out)
	agentAPI := regexp.MustCompile(`(?m)^Agent API:  (https://127\.0\.0\.1:\d+)$`).FindStringSubmatch(out)
	g.Expect(agentAPI).To(HaveLen(2), out)
	g.Expect(h.out.String()).To(ContainSubstring("agent service (InfraEnv discovery ISOs, agent-based installs): " + agentAPI[1] + "\n"))
	out, err = kubectl(t, dir, infraEnv, "apply", "-f", "-")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var isoURL string
	g.Eventually(func() string {
		isoURL, _ = kubectl(t, dir, "", "get", "infraenv", "-n", "default", "demo", "-o", "jsonpath={.status.isoDownloadURL}")
		return isoURL
	}, time.Minute, 200*time.Millisecond).Should(HavePrefix(agentAPI[1] + "/"))
	ca, err := os.ReadFile(localcp.CAPath(dir))
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := trusting.Get(isoURL)
	g.Expect(err).NotTo(HaveOccurred())
	iso, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	cfg, err := imageservice.ReadISOHostConfig(bytes.NewReader(iso))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Discovery.CACert).To(Equal(string(ca)), "the discovery agent verifies the service with the hub CA")
	g.Expect(cfg.Discovery.ServiceURL).To(Equal(agentAPI[1]))
	if resp, err = http.Head(isoURL); err == nil {
		resp.Body.Close()
	}
	g.Expect(err).To(MatchError(ContainSubstring("certificate signed by unknown authority")), "a client without the hub CA refuses the service")

	out, err = metalshift(t, "hub", "up", "--dir", dir, "--bin-dir", toolsDir)
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("already running"))
	g.Expect(out).To(ContainSubstring("metalshift hub down --dir " + dir))

	out, err = metalshift(t, "hub", "kubeconfig", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(out)).To(Equal(localcp.KubeconfigPath(dir)))

	out, err = metalshift(t, "hub", "down", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(h.wait(t, time.Minute)).To(Succeed())
	expectGone(g, pids)
	g.Expect(h.out.String()).To(ContainSubstring("Hub is ready"))

	out, err = metalshift(t, "hub", "status", "--dir", dir)
	g.Expect(err).To(HaveOccurred(), "status exits non-zero for a stopped hub")
	g.Expect(out).To(ContainSubstring("Phase:      Stopped"))
	out, err = metalshift(t, "hub", "down", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("No hub is running"))
}

const infraEnv = `apiVersion: v1
kind: Secret
metadata:
  name: pull-secret
  namespace: default
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths":{"quay.io":{"auth":"c2ltOnNpbQ=="}}}'
---
apiVersion: agent-install.openshift.io/v1beta1
kind: InfraEnv
metadata:
  name: demo
  namespace: default
spec:
  pullSecretRef:
    name: pull-secret
`

const topologyCluster = `apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: topology
  namespace: default
spec:
  topology:
    classRef:
      name: some-class
    version: v1.36.0
`

// TestHubStopPaths stops the hub by signal and by killing it outright:
// either way no etcd, kube-apiserver or kube-controller-manager remains.
func TestHubStopPaths(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signal  syscall.Signal
		orderly bool
	}{
		{name: "Ctrl-C", signal: syscall.SIGINT, orderly: true},
		{name: "SIGTERM", signal: syscall.SIGTERM, orderly: true},
		{name: "parent killed", signal: syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			h := hubUp(t, dir)
			pids := childPIDs(t, dir)
			g.Expect(h.cmd.Process.Signal(tc.signal)).To(Succeed())
			err := h.wait(t, time.Minute)
			if tc.orderly {
				g.Expect(err).NotTo(HaveOccurred(), "an orderly stop exits 0")
				g.Expect(h.out.String()).To(ContainSubstring("Stopped"))
			}
			expectGone(g, pids)
			g.Expect(localcp.Running(dir)).To(BeFalse())
		})
	}
}
