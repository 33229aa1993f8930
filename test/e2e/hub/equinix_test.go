package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	simequinix "github.com/metalshift/metalshift/sim/equinix"
)

// startEquinix runs `metalshift sim equinix` with devices that are
// simulated machines, and returns what it prints (METAL_API_URL, ...).
func startEquinix(t *testing.T, args ...string) map[string]string {
	t.Helper()
	g := NewWithT(t)
	out, log := &syncBuffer{}, &syncBuffer{}
	sim := exec.Command(metalshiftBin, append([]string{"sim", "equinix", "--project", "e2e", "--backend", "light", "--bin-dir", toolsDir}, args...)...)
	sim.Stdout, sim.Stderr = out, log
	g.Expect(sim.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = sim.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = sim.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = sim.Process.Kill()
		}
		if t.Failed() {
			t.Logf("sim equinix:\n%s", log)
		}
	})
	g.Eventually(out.String, 10*time.Second).Should(ContainSubstring("METAL_AUTH_TOKEN="))
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	return vars
}

// startImage runs `metalshift sim image` and returns the image's URL and
// SHA-256.
func startImage(t *testing.T) (string, string) {
	t.Helper()
	g := NewWithT(t)
	env := filepath.Join(t.TempDir(), "image.env")
	img := exec.Command(metalshiftBin, "sim", "image", "--size", "4Mi", "--env", env)
	g.Expect(img.Start()).To(Succeed())
	t.Cleanup(func() { _ = img.Process.Kill(); _ = img.Wait() })
	var data []byte
	g.Eventually(func() string { data, _ = os.ReadFile(env); return string(data) }, 10*time.Second).Should(ContainSubstring("IMAGE_SHA256="))
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	return vars["IMAGE_URL"], vars["IMAGE_SHA256"]
}

func ledger(g Gomega, apiURL string) simequinix.Ledger {
	resp, err := http.Get(strings.TrimSuffix(apiURL, "/metal/v1") + "/_ledger")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var l simequinix.Ledger
	g.Expect(json.NewDecoder(resp.Body).Decode(&l)).To(Succeed())
	return l
}

// TestEquinixInstallHubKilled: an install on the emulated Equinix Metal
// whose API answers 10 % of requests with 503 under a rate limit (429s),
// and whose first device for master-0 ends failed. The hub and create
// cluster are SIGKILLed once the master's machine has its device; `hub up`
// finishes the install. Every live device is a machine's own (no machine
// got a second one), the failed device was replaced, and destroy cluster
// leaves the project empty.
func TestEquinixInstallHubKilled(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	imageURL, imageSum := startImage(t)
	metal := startEquinix(t, "--faults", "seed=11,equinix.5xx=10%:503,equinix.failed[e2e-master-0]=@1", "--rate-limit", "40", "--rate-window", "1s")
	dir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "metal-key")
	g.Expect(os.WriteFile(keyFile, []byte(metal["METAL_AUTH_TOKEN"]), 0o600)).To(Succeed())
	hubDir := filepath.Join(dir, "hub")
	var resumed *exec.Cmd
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(filepath.Join(hubDir, "kubeconfig"), "-n", "e2e", "get", "machines,equinixmetalmachines,equinixmetalclusters", "-o", "wide")
			t.Logf("hub:\n%s", out)
			if data, err := os.ReadFile(filepath.Join(hubDir, "logs", "manager.log")); err == nil && len(data) > 20000 {
				t.Logf("manager.log (tail):\n%s", data[len(data)-20000:])
			}
		}
		_, _ = run(t, "hub", "down", "--dir", hubDir)
		if resumed != nil {
			_ = resumed.Wait()
		}
	})
	ic := fmt.Sprintf(`apiVersion: v1
baseDomain: example.com
metadata: {name: e2e}
controlPlane: {name: master, replicas: 1}
compute: [{name: worker, replicas: 1}]
platform:
  equinixMetal:
    projectID: %s
    metro: sv
    apiURL: %s
    metadataURL: %s
    apiKeyFile: %s
    defaultMachinePlatform: {plan: c3.small.x86}
pullSecret: '{"auths":{"quay.io":{"auth":"%s"}}}'
metalshift:
  osImage: {url: "%s", checksum: "%s"}
`, metal["METAL_PROJECT_ID"], metal["METAL_API_URL"], metal["METAL_METADATA_URL"], keyFile, pullSecretCanary, imageURL, imageSum)
	g.Expect(os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(ic), 0o600)).To(Succeed())
	// A device that boots while the hub is down cannot load its iPXE script
	// and sits in its boot loader until the provider reinstalls it: after
	// 30 s here, as a user may edit the manifests before create cluster.
	out, err := run(t, "create", "manifests", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	emcFiles, err := filepath.Glob(filepath.Join(dir, "cluster-api", "*_equinixmetalcluster_e2e.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(emcFiles).To(HaveLen(1))
	emcYAML, err := os.ReadFile(emcFiles[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(emcYAML)).To(ContainSubstring("\nspec:\n"))
	emcYAML = []byte(strings.Replace(string(emcYAML), "\nspec:\n", "\nspec:\n  deviceBootTimeout: 30s\n", 1))
	g.Expect(os.WriteFile(emcFiles[0], emcYAML, 0o600)).To(Succeed())

	create := exec.Command(metalshiftBin, "create", "cluster", "--dir", dir, "--timeout", "8m")
	createOut := &syncBuffer{}
	create.Stdout, create.Stderr = createOut, createOut
	g.Expect(create.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() { _ = create.Wait(); close(exited) }()
	t.Cleanup(func() { _ = create.Process.Kill(); <-exited })

	// Killed once the master's machine has its device (the bootstrap
	// node serves the API then).
	hub := hubClient(g, filepath.Join(hubDir, "kubeconfig"))
	g.Eventually(func() bool {
		emms := &infrav1.EquinixMetalMachineList{}
		if err := hub.List(context.Background(), emms, client.InNamespace("e2e")); err != nil {
			return false
		}
		for _, m := range emms.Items {
			if strings.HasPrefix(m.Name, "e2e-master-") && m.Status.DeviceID != "" {
				return true
			}
		}
		return false
	}, 5*time.Minute, 100*time.Millisecond).Should(BeTrue(), "no master device was made:\n%s", createOut)
	g.Expect(create.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Eventually(exited, time.Minute).Should(BeClosed())
	killHub(g, hubDir)
	t.Logf("SIGKILLed the hub and create cluster once the master's device was made; create cluster had printed:\n%s", createOut)

	resumed = exec.Command(metalshiftBin, "hub", "up", "--dir", hubDir)
	resumedOut := &syncBuffer{}
	resumed.Stdout, resumed.Stderr = resumedOut, resumedOut
	g.Expect(resumed.Start()).To(Succeed())
	out, err = run(t, "hub", "status", "--dir", hubDir, "--wait", "3m")
	g.Expect(err).NotTo(HaveOccurred(), "%s\n%s", out, resumedOut)
	out, err = run(t, "wait-for", "install-complete", "--dir", dir, "--timeout", "6m")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	out, err = kubectl(filepath.Join(dir, "auth", "kubeconfig"), "get", "nodes", "--no-headers")
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Expect(strings.Count(out, " Ready ")).To(Equal(2), "%s", out)

	// Every live device is the one of a machine that has it.
	emms := &infrav1.EquinixMetalMachineList{}
	g.Expect(hub.List(context.Background(), emms, client.InNamespace("e2e"))).To(Succeed())
	owner := map[string]string{}
	for _, m := range emms.Items {
		owner[infrav1.EquinixMetalMachineTagPrefix+string(m.UID)] = m.Status.DeviceID
	}
	replaced := false
	for _, m := range emms.Items {
		if m.Name == "e2e-master-0" && m.Status.FailedDevices == 1 {
			replaced = true
		}
	}
	g.Expect(replaced).To(BeTrue(), "master-0's failed device was replaced")
	live := 0
	for _, d := range ledger(g, metal["METAL_API_URL"]).Devices {
		if d.State == "deprovisioning" {
			continue
		}
		live++
		var mine string
		for _, tag := range d.Tags {
			if id, ok := owner[tag]; ok {
				mine = id
			}
		}
		g.Expect(mine).To(Equal(d.ID), "device %s (%s) is no machine's own", d.ID, d.Hostname)
	}
	g.Expect(live).To(Equal(len(emms.Items)))

	out, err = run(t, "destroy", "cluster", "--dir", dir)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(func(g Gomega) {
		g.Expect(ledger(g, metal["METAL_API_URL"]).Empty()).To(BeTrue())
	}, time.Minute).Should(Succeed())
}
