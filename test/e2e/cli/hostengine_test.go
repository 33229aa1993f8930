package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestHostEngineAcceptance is the host-engine acceptance path a user
// follows: a hub, `metalshift sim bmc --hosts 3`, its manifests applied with
// kubectl, hosts going registering → inspecting → available, then one
// provisioned by setting spec.image and spec.userData; kubectl's columns
// are metal3's.
func TestHostEngineAcceptance(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hubUp(t, dir)

	manifests := filepath.Join(t.TempDir(), "hosts.yaml")
	simCmd := exec.Command(metalshiftBin, "sim", "bmc", "--hosts", "3", "--hub-dir", dir, "--manifests", manifests, "--password", "Canary-Sim-Pa55")
	simOut := &lockedBuffer{}
	simCmd.Stdout, simCmd.Stderr = simOut, simOut
	g.Expect(simCmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = simCmd.Process.Kill(); _ = simCmd.Wait() })
	g.Eventually(func() error { _, err := os.Stat(manifests); return err }, 10*time.Second).Should(Succeed(), simOut.String)

	watch := exec.Command(filepath.Join(toolsDir, "kubectl"), "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"get", "bmh", "-w", "-o", "custom-columns=NAME:.metadata.name,STATE:.status.provisioning.state", "--no-headers")
	watchOut := &lockedBuffer{}
	watch.Stdout = watchOut
	g.Expect(watch.Start()).To(Succeed())
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })

	out, err := kubectl(t, dir, "", "apply", "-f", manifests)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func(g Gomega) {
		out, err := kubectl(t, dir, "", "get", "bmh", "-o", "jsonpath={range .items[*]}{.status.provisioning.state}{\"\\n\"}{end}")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Fields(out)).To(Equal([]string{"available", "available", "available"}))
	}, 60*time.Second).Should(Succeed())

	out, err = kubectl(t, dir, "", "get", "bmh")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{"NAME", "STATE", "CONSUMER", "ONLINE", "ERROR", "AGE"}))
	g.Expect(out).To(MatchRegexp(`host-0\s+available\s+false\s+`))
	out, err = kubectl(t, dir, "", "get", "bmh", "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal([]string{"NAME", "STATUS", "STATE", "CONSUMER", "BMC", "ONLINE", "ERROR", "AGE"}))

	// Provision host-1 the way a user does: a userData Secret, then image and online.
	data := make([]byte, 2<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer images.Close()
	out, err = kubectl(t, dir, "", "create", "secret", "generic", "host-1-user-data", "--from-literal=userData={\"ignition\":{\"version\":\"3.4.0\"}}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	patch := fmt.Sprintf(`{"spec":{"online":true,"userData":{"name":"host-1-user-data"},"image":{"url":"%s/os.raw","checksum":"%s","checksumType":"sha256"}}}`,
		images.URL, hex.EncodeToString(sum[:]))
	out, err = kubectl(t, dir, "", "patch", "bmh", "host-1", "--type=merge", "-p", patch)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func(g Gomega) {
		out, err := kubectl(t, dir, "", "get", "bmh", "host-1", "--no-headers")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(MatchRegexp(`host-1\s+provisioned\s+true\s+`))
	}, 90*time.Second).Should(Succeed())

	// kubectl get -w prints every change: host-1 went through each state, in order.
	want := []string{"registering", "inspecting", "available", "provisioning", "provisioned"}
	var seen []string
	for _, line := range strings.Split(watchOut.String(), "\n") {
		name, state, _ := strings.Cut(strings.TrimSpace(line), " ")
		state = strings.TrimSpace(state)
		if name == "host-1" && slices.Contains(want, state) && (len(seen) == 0 || seen[len(seen)-1] != state) {
			seen = append(seen, state)
		}
	}
	g.Expect(seen).To(Equal(want), "kubectl get bmh -w:\n%s", watchOut.String())
	logs, _ := os.ReadFile(filepath.Join(dir, "logs", "manager.log"))
	g.Expect(string(logs)).To(ContainSubstring("Host changed state"))
	g.Expect(string(logs)).NotTo(ContainSubstring("Canary-Sim-Pa55"), "no BMC password in the logs")
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
