package hub

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
// addresses and the hub's addresses, and sees every boot's traffic: a tap
// between the machines and the hub keeps every host initrd (with its
// boot's ticket) the machines load. It does not race a machine to its first ask (a
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
	st, err := localcp.ReadState(hubDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Ports.DeployBoot).NotTo(BeZero(), "the hub serves network boot")
	bootURL := fmt.Sprintf("http://127.0.0.1:%d", st.Ports.DeployBoot)
	tap := newBootTap(t, bootURL)
	hostsYAML, imageURL, imageSum, _ := startSimWith(t, 3, "--virtual-media=false", "--hub-dir", hubDir, "--boot-url", tap.self)
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
	web := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

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

	// Once a host's agent has the token of its request (or the request is
	// over, which it is once the host is provisioned), everything the
	// attacker kept of that boot gets nothing.
	tried, askedCurrent := map[string]bool{}, 0
	g.Eventually(func() int {
		hosts := &metal3v1.BareMetalHostList{}
		_ = hub.List(ctx, hosts, client.InNamespace("victim"))
		byID := map[string]*metal3v1.BareMetalHost{}
		for i := range hosts.Items {
			h := &hosts.Items[i]
			byID[deployapi.HostID(h.Namespace, h.Name, string(h.UID))] = h
		}
		for _, cfg := range tap.all() {
			h := byID[cfg.HostID]
			if h == nil || tried[cfg.Ticket] {
				continue
			}
			current, over := claimedOrOver(h, cfg.Ticket)
			if !current && !over {
				continue
			}
			tried[cfg.Ticket] = true
			t.Logf("host %s: its agent has the token of its request (still current: %t); replaying its boot as the attacker", h.Name, current)
			handedOut, err := replay(web, deployURL, bootURL, h.Spec.BootMACAddress, cfg)
			g.Expect(err).NotTo(HaveOccurred(), "host %s", h.Name)
			if handedOut {
				// The server refused it as handed out already (409), not
				// as a request that ended since the host list was read.
				askedCurrent++
			}
		}
		return len(tried)
	}, 8*time.Minute, 20*time.Millisecond).Should(BeNumerically(">=", 3), "the boots of the bootstrap node, the master and the worker were each replayed:\n%s", createOut)
	stop()

	select {
	case err := <-createDone:
		g.Expect(err).NotTo(HaveOccurred(), "%s", createOut)
	case <-time.After(9 * time.Minute):
		t.Fatalf("create cluster did not finish:\n%s", createOut)
	}
	g.Expect(createOut.String()).To(ContainSubstring("Reached install-complete"))

	t.Logf("the deploy server refused %d of the attacker's token asks as handed out already (409)", askedCurrent)
	// The hub saw the attacker's asks for a token handed out already. The
	// recorder writes its Events in the background: a list right after the
	// install may come before the last one is written.
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(hub.List(context.Background(), events, client.InNamespace("victim"))).To(Succeed())
		asked := 0
		for _, e := range events.Items {
			if e.Reason == "DeployAgentTokenAskedAgain" {
				asked++
			}
		}
		g.Expect(asked).To(BeNumerically(">=", min(askedCurrent, 1)), "the attacker's ask for a handed-out token is an Event")
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
}

// claimedOrOver: current, the host's agent has the token of the request
// ticket is for, which is still the host's current one; over, that request
// is over (the host went on: its agent had the token, or the engine gave
// up on it).
func claimedOrOver(h *metal3v1.BareMetalHost, ticket string) (current, over bool) {
	gen, _, err := deployapi.ParseTicket(ticket)
	if err != nil {
		return false, false
	}
	d := h.Status.DeployAgent
	if d == nil || d.Request == nil || d.Request.Generation != gen {
		return false, true
	}
	return d.Token != nil && d.Token.Generation == gen, false
}

// replay uses what the attacker kept of a boot after the host's agent got
// its token: each step must get nothing.
func replay(web *http.Client, deployURL, bootURL, mac string, cfg deployapi.BootConfig) (handedOut bool, err error) {
	body := []byte(`{"session":"attacker"}`)
	code, got := call(web, http.MethodPost, deployURL+fmt.Sprintf(deployapi.TokenPath, cfg.HostID), "Bearer "+cfg.Ticket, body)
	if code == http.StatusOK {
		return false, fmt.Errorf("the kept ticket got a token: %s", got)
	}
	handedOut = code == http.StatusConflict
	for _, path := range []string{deployapi.InstructionsPath, deployapi.StatusPath} {
		method := http.MethodGet
		if path == deployapi.StatusPath {
			method = http.MethodPost
		}
		code, got := call(web, method, deployURL+fmt.Sprintf(path, cfg.HostID), "Bearer "+cfg.Ticket, []byte(`{"phase":"failed","session":"attacker"}`))
		if code/100 == 2 || bytes.Contains([]byte(got), []byte("userData")) {
			return handedOut, fmt.Errorf("%s with the ticket as a token: %d %s", path, code, got)
		}
	}
	if code, got := call(web, http.MethodGet, bootURL+"/boot/by-mac/"+mac, "", nil); code == http.StatusOK {
		return handedOut, fmt.Errorf("the boot script is still served: %s", got)
	}
	return handedOut, nil
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

// bootTap stands between the simulated machines and the hub's network
// boot listener, as an attacker who sees the provisioning network's
// traffic does: it passes every request on, points the boot scripts'
// files at itself, and keeps the boot configuration each host initrd
// carries, by ticket (one per boot).
type bootTap struct {
	hub  string // the hub's boot URL
	self string // the tap's URL
	mu   sync.Mutex
	kept map[string]deployapi.BootConfig
}

func newBootTap(t *testing.T, hub string) *bootTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(hub)
	if err != nil {
		t.Fatal(err)
	}
	tap := &bootTap{hub: hub, self: "http://" + ln.Addr().String(), kept: map[string]deployapi.BootConfig{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = tap.look
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tap
}

// look keeps what a host initrd carries and points a boot script's files
// at the tap.
func (p *bootTap) look(resp *http.Response) error {
	path := resp.Request.URL.Path
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(path, "/boot/by-mac/") && path != "/images/deploy-host.img" {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return err
	}
	if strings.HasPrefix(path, "/boot/by-mac/") {
		data = bytes.ReplaceAll(data, []byte(p.hub), []byte(p.self))
	} else if cfg, err := imageservice.ReadHostInitrd(bytes.NewReader(data)); err == nil && cfg.Ticket != "" {
		p.mu.Lock()
		p.kept[cfg.HostID] = cfg
		p.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
	return nil
}

// all is every boot configuration the tap has seen, one per boot.
func (p *bootTap) all() []deployapi.BootConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]deployapi.BootConfig, 0, len(p.kept))
	for _, cfg := range p.kept {
		out = append(out, cfg)
	}
	return out
}
