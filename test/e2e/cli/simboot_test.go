package cli

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/imageservice"
)

// TestSimBootISO: `metalshift sim bmc --boot-iso` boots each machine from
// the ISO as a person would at its BMC: the machine reads the ISO from the
// URL, boots the discovery agent in it, and the agent registers with the
// service the ISO names, under the machine's UUID; labs side by side
// (--name-prefix, --subnet, --mac-octet) name their machines apart.
func TestSimBootISO(t *testing.T) {
	g := NewWithT(t)
	svc := &fakeAgentService{}
	server := httptest.NewServer(svc)
	defer server.Close()
	images, err := imageservice.LightImages()
	g.Expect(err).NotTo(HaveOccurred())
	iso, err := images.ISO(deployapi.BootConfig{Discovery: &deployapi.Discovery{
		ServiceURL: server.URL, InfraEnvID: "3f1c0a52-6d2e-4c51-9d0e-2b7f1f0e8a11", Token: "infraenv-token"}})
	g.Expect(err).NotTo(HaveOccurred())
	svc.iso = iso

	// The signature in the URL's query is never printed.
	isoURL := server.URL + "/images/discovery.iso?api_key=Canary-Signature"
	cmd := exec.Command(metalshiftBin, "sim", "bmc", "--hosts", "2", "--boot-iso", isoURL, "--console",
		"--name-prefix", "sno", "--subnet", "127.43.9", "--mac-octet", "0x39", "--hub-dir", t.TempDir())
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	g.Expect(cmd.Start()).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})

	g.Eventually(svc.registered, 30*time.Second, 100*time.Millisecond).Should(ConsistOf(
		"6d657461-6c73-4869-8674-540000000000", "6d657461-6c73-4869-8674-540000000001"), out.String)
	g.Expect(svc.isoReads()).To(BeNumerically(">", 0), "the machines read the ISO from its URL")
	g.Expect(svc.tokens()).To(ConsistOf("infraenv-token"), "the agents present the InfraEnv's token")
	g.Expect(out.String()).To(ContainSubstring("sno-0: inserted " + server.URL + "/images/discovery.iso?… in the virtual CD, boot override Cd (once), powered on"))
	g.Expect(out.String()).To(ContainSubstring("sno-1: Discovery agent started for infra env 3f1c0a52-6d2e-4c51-9d0e-2b7f1f0e8a11"))
	g.Expect(out.String()).NotTo(ContainSubstring("apiVersion"), "no BareMetalHosts without --manifests when the machines boot an ISO")
	g.Expect(out.String()).NotTo(ContainSubstring("Canary-Signature"))

	g.Expect(cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case err := <-done:
		g.Expect(err).NotTo(HaveOccurred(), out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("sim bmc did not stop on Ctrl-C:\n%s", out)
	}
}

// fakeAgentService serves a discovery ISO and records the hosts that
// register from it; it answers registrations with 503, so that agents
// keep trying and do nothing else.
type fakeAgentService struct {
	iso *io.SectionReader

	mu      sync.Mutex
	reads   int
	hosts   map[string]bool
	secrets map[string]bool
}

func (f *fakeAgentService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/images/discovery.iso":
		f.mu.Lock()
		f.reads++
		f.mu.Unlock()
		http.ServeContent(w, r, "discovery.iso", time.Time{}, io.NewSectionReader(f.iso, 0, f.iso.Size()))
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, assistedapi.BasePath+"/v2/infra-envs/") && strings.HasSuffix(r.URL.Path, "/hosts"):
		var p assistedapi.HostCreateParams
		_ = json.NewDecoder(r.Body).Decode(&p)
		f.mu.Lock()
		if f.hosts == nil {
			f.hosts, f.secrets = map[string]bool{}, map[string]bool{}
		}
		f.hosts[p.HostID] = true
		f.secrets[r.Header.Get("X-Secret-Key")] = true
		f.mu.Unlock()
		http.Error(w, "the test service registers nobody", http.StatusServiceUnavailable)
	default:
		http.NotFound(w, r)
	}
}

// registered returns the host IDs that registered.
func (f *fakeAgentService) registered() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.hosts))
}

// tokens returns the X-Secret-Key headers the hosts sent.
func (f *fakeAgentService) tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.secrets))
}

func (f *fakeAgentService) isoReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}
