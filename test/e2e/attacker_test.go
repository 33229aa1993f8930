package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	ignitionapi "github.com/metalshift/metalshift/api/ignition/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/localcp"
)

// TestAttacker plays an attacker on the provisioning network against a
// running hub, from another process, while a cluster installs on machines
// that boot over the network (PXE). The attacker knows the machines' MAC
// addresses and the hub's addresses, and sees every boot's traffic: it
// asks for every MAC's boot script all the time and keeps the host initrd
// of each script it gets. It does not race a machine to its first ask (a
// network boot carries no secret: docs/security.md says so and why);
// once each host's agent has its token, everything the attacker kept must
// get nothing: no token, no instructions (the user data with the ignition
// server's token), no boot script; the ignition server gives nothing
// without a valid token. The hub records the attacker's ask, and the
// install completes.
func TestAttacker(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	hubDir, dir := t.TempDir(), t.TempDir()
	startHub(t, hubDir)
	hostsYAML, imageURL, imageSum, _ := startSimWith(t, 3, "--virtual-media=false", "--hub-dir", hubDir)
	st, err := localcp.ReadState(hubDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Ports.DeployBoot).NotTo(BeZero(), "the hub serves network boot")
	bootURL := fmt.Sprintf("http://127.0.0.1:%d", st.Ports.DeployBoot)
	deployURL := fmt.Sprintf("https://127.0.0.1:%d", st.Ports.Deploy)
	ignitionURL := fmt.Sprintf("https://127.0.0.1:%d", st.Ports.Ignition)
	data, err := os.ReadFile(hostsYAML)
	g.Expect(err).NotTo(HaveOccurred())
	var macs []string
	for _, m := range regexp.MustCompile(`bootMACAddress: "?([0-9a-fA-F:]{17})`).FindAllStringSubmatch(string(data), -1) {
		macs = append(macs, m[1])
	}
	g.Expect(macs).To(HaveLen(3))

	hubKubeconfig := filepath.Join(hubDir, "kubeconfig")
	hub := hubClient(g, hubKubeconfig)
	vip := fmt.Sprintf("127.%d.%d.10", 100+rand.IntN(100), rand.IntN(250))
	out, err := run(t, "create", "install-config", "--dir", dir, "--name", "victim", "--api-vip", vip, "--masters", "1", "--workers", "1",
		"--hosts-from", hostsYAML, "--os-image-url", imageURL, "--os-image-checksum", imageSum)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	create := exec.Command(metalshiftBin, "create", "cluster", "--dir", dir, "--kubeconfig", hubKubeconfig, "--timeout", "8m")
	createOut := &syncBuffer{}
	create.Stdout, create.Stderr = createOut, createOut
	g.Expect(create.Start()).To(Succeed())
	createDone := make(chan error, 1)
	go func() { createDone <- create.Wait() }()
	t.Cleanup(func() {
		if create.ProcessState == nil {
			_ = create.Process.Kill()
			<-createDone
		}
	})

	// The attacker: no credential, any certificate.
	web := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the attacker trusts anything
	sniffer := &bootSniffer{web: web, bootURL: bootURL, kept: map[string]deployapi.BootConfig{}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go sniffer.run(ctx, macs)

	// The ignition server, without a token and with forged ones, for the
	// bootstrap Machine's config (its name is no secret).
	var bootstrapConfig string
	g.Eventually(func() string {
		l := &bootstrapv1.OpenShiftConfigList{}
		_ = hub.List(ctx, l, client.InNamespace("victim"))
		for _, c := range l.Items {
			if c.Spec.Bootstrap != nil && c.Status.DataSecretName != nil {
				bootstrapConfig = *c.Status.DataSecretName
			}
		}
		return bootstrapConfig
	}, 5*time.Minute, time.Second).ShouldNot(BeEmpty(), "the bootstrap Machine's config:\n%s", createOut)
	for _, token := range []string{"", "Bearer ", "Bearer 9999999999.AAAA", "Bearer " + strings.Repeat("x", 4096)} {
		code, body := call(web, http.MethodGet, ignitionURL+ignitionapi.PathPrefix+"victim/"+bootstrapConfig, token, nil)
		g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests), "%q: %s", token, body)
		g.Expect(body).NotTo(ContainSubstring("ignition"))
	}

	// Once a host's agent has the token of its request, everything the
	// attacker kept of that boot gets nothing.
	tried := map[string]bool{}
	g.Eventually(func() int {
		hosts := &metal3v1.BareMetalHostList{}
		_ = hub.List(ctx, hosts, client.InNamespace("e2e"))
		for i := range hosts.Items {
			h := &hosts.Items[i]
			cfg, ok := sniffer.get(h.Spec.BootMACAddress)
			if !ok || tried[h.Name] || !claimed(h, cfg.HostID) {
				continue
			}
			tried[h.Name] = true
			t.Logf("host %s: its agent has the token of request %s; replaying its boot as the attacker", h.Name, h.Status.DeployAgent.Request.Generation)
			g.Expect(replay(web, deployURL, bootURL, h.Spec.BootMACAddress, cfg)).To(Succeed(), "host %s", h.Name)
		}
		return len(tried)
	}, 8*time.Minute, 200*time.Millisecond).Should(BeNumerically(">=", 1), "no host's boot was seen and claimed:\n%s", createOut)
	stop()

	select {
	case err := <-createDone:
		g.Expect(err).NotTo(HaveOccurred(), "%s", createOut)
	case <-time.After(9 * time.Minute):
		t.Fatalf("create cluster did not finish:\n%s", createOut)
	}
	g.Expect(createOut.String()).To(ContainSubstring("Reached install-complete"))

	// The hub saw the attacker's ask.
	events := &corev1.EventList{}
	g.Expect(hub.List(context.Background(), events, client.InNamespace("e2e"))).To(Succeed())
	asked := 0
	for _, e := range events.Items {
		if e.Reason == "DeployAgentTokenAskedAgain" {
			asked++
		}
	}
	g.Expect(asked).To(BeNumerically(">=", 1), "the attacker's ask for a handed-out token is an Event")
}

// claimed: the host's agent has the token of the current request, the one
// the kept boot configuration of host id is for.
func claimed(h *metal3v1.BareMetalHost, id string) bool {
	d := h.Status.DeployAgent
	return d != nil && d.Request != nil && d.Token != nil && d.Token.Generation == d.Request.Generation && id != ""
}

// replay uses what the attacker kept of a boot after the host's agent got
// its token: each step must get nothing.
func replay(web *http.Client, deployURL, bootURL, mac string, cfg deployapi.BootConfig) error {
	body := []byte(`{"session":"attacker"}`)
	if code, got := call(web, http.MethodPost, deployURL+fmt.Sprintf(deployapi.TokenPath, cfg.HostID), "Bearer "+cfg.Ticket, body); code == http.StatusOK {
		return fmt.Errorf("the kept ticket got a token: %s", got)
	}
	for _, path := range []string{deployapi.InstructionsPath, deployapi.StatusPath} {
		method := http.MethodGet
		if path == deployapi.StatusPath {
			method = http.MethodPost
		}
		code, got := call(web, method, deployURL+fmt.Sprintf(path, cfg.HostID), "Bearer "+cfg.Ticket, []byte(`{"phase":"failed","session":"attacker"}`))
		if code/100 == 2 || bytes.Contains([]byte(got), []byte("userData")) {
			return fmt.Errorf("%s with the ticket as a token: %d %s", path, code, got)
		}
	}
	if code, got := call(web, http.MethodGet, bootURL+"/boot/by-mac/"+mac, "", nil); code == http.StatusOK {
		return fmt.Errorf("the boot script is still served: %s", got)
	}
	return nil
}

// call sends one request and returns the status and (the start of) the
// body; a failed connection is status 0.
func call(web *http.Client, method, url, auth string, body []byte) (int, string) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := web.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(data)
}

// bootSniffer asks for every MAC's boot script all the time, as a machine
// on the provisioning network can, and keeps the boot configuration the
// script's host initrd carries.
type bootSniffer struct {
	web     *http.Client
	bootURL string
	mu      sync.Mutex
	kept    map[string]deployapi.BootConfig
}

func (s *bootSniffer) run(ctx context.Context, macs []string) {
	for ctx.Err() == nil {
		for _, mac := range macs {
			code, script := call(s.web, http.MethodGet, s.bootURL+"/boot/by-mac/"+mac, "", nil)
			if code != http.StatusOK {
				continue
			}
			boot, err := imageservice.ParseIPXEScript(script)
			if err != nil || len(boot.Initrds) == 0 {
				continue
			}
			resp, err := s.web.Get(boot.Initrds[len(boot.Initrds)-1].URL) // the host's own
			if err != nil {
				continue
			}
			cfg, err := imageservice.ReadHostInitrd(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if err == nil && cfg.Ticket != "" {
				s.mu.Lock()
				s.kept[strings.ToLower(mac)] = cfg
				s.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		// Slow enough for the servers' per-source budget, which the
		// simulated machines share with the attacker on loopback.
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *bootSniffer) get(mac string) (deployapi.BootConfig, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, ok := s.kept[strings.ToLower(mac)]
	return cfg, ok
}
