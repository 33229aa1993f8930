package baremetalhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/agent/configdrive"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/hostengine/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/testenv"
)

// exchange posts a ticket to the deploy server's token endpoint.
func exchange(t *testing.T, e *engine, hostID, ticket, session string) (int, deployapi.TokenResponse) {
	t.Helper()
	body, _ := json.Marshal(deployapi.TokenRequest{Session: session})
	code, out := testenv.Call(t, http.MethodPost, e.DeployURL+"/deploy/v1/hosts/"+hostID+"/token", ticket, body)
	var tr deployapi.TokenResponse
	if code == http.StatusOK {
		NewWithT(t).Expect(json.Unmarshal([]byte(out), &tr)).To(Succeed())
	}
	return code, tr
}

// sniffer sees what a machine sends and gets, as anyone on a plain-HTTP
// provisioning network would: URLs, host initrds, agent tokens.
type sniffer struct {
	rt          http.RoundTripper
	mu          sync.Mutex
	hostInitrds map[string][]byte // URL → body
	tokens      []string
}

func (s *sniffer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	host, token := r.URL.Path == deployserver.HostInitrdPath, strings.HasSuffix(r.URL.Path, "/token")
	if !host && !token {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	defer s.mu.Unlock()
	if host {
		s.hostInitrds[r.URL.String()] = body
	} else {
		var tr deployapi.TokenResponse
		_ = json.Unmarshal(body, &tr)
		s.tokens = append(s.tokens, tr.Token)
	}
	return resp, err
}

// TestSniffedMAC plays an attacker on the provisioning network against a
// host that PXE boots: knowing its MAC, and seeing (plain HTTP) its boot
// script, host initrd and agent token, it gets nothing once the host's
// agent has claimed its request: no boot script, no host initrd, no token,
// no instructions (the user data with the bootstrap Ignition's token); its
// ask for the token is refused and shows on the host as an Event and a
// condition; the agent's own token is refused once its report is final.
func TestSniffedMAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	sn := &sniffer{rt: http.DefaultTransport, hostInitrds: map[string][]byte{}}
	lab.Firmware.HTTP.Transport = sn
	m := lab.Machines[0]
	mac := m.Hardware.NICs[0].MAC
	img := newImageServer(t, 1<<20, true)
	const ignitionCanary = "ignition-bearer-canary-8c1f"
	ud := userDataSecret(t, ns, "bootstrap-user-data", `{"ignition":{"version":"3.4.0"},"note":"`+ignitionCanary+`"}`)
	host := createHost(t, lab, 0, ns, false, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image, h.Spec.UserData, h.Spec.Online = img.Image(), ud, true
		h.Spec.AutomatedCleaningMode = metal3v1.CleaningModeDisabled
	})

	// The host's agent has claimed its request and downloads the image.
	g.Eventually(func(g Gomega) {
		rep := get(g, host).DeployAgentReport()
		g.Expect(rep).NotTo(BeNil())
		g.Expect(rep.Phase).To(Equal(deployapi.PhaseRunning))
	}, 60*time.Second).Should(Succeed())
	g.Eventually(img.Downloads.Load, 30*time.Second).Should(BeEquivalentTo(1))
	id, gen := deployserver.HostID(host), host.Status.DeployAgent.Request.Generation
	sn.mu.Lock()
	g.Expect(sn.hostInitrds).To(HaveLen(1), "the host booted once")
	g.Expect(sn.tokens).To(HaveLen(1))
	var initrdURL string
	var initrd []byte
	for u, b := range sn.hostInitrds {
		initrdURL, initrd = u, b
	}
	agentToken := sn.tokens[0]
	sn.mu.Unlock()

	// Knowing the MAC: no boot script.
	code, body := testenv.Call(t, http.MethodGet, e.DeployURL+deployserver.PXEPath+mac, "", nil)
	g.Expect(code).To(Equal(http.StatusNotFound), body)
	// Replaying the host initrd's URL: gone.
	code, _ = testenv.Call(t, http.MethodGet, initrdURL, "", nil)
	g.Expect(code).To(Equal(http.StatusGone))
	// The ticket in the sniffed initrd: refused, and seen.
	cfg, err := imageservice.ReadHostInitrd(bytes.NewReader(initrd))
	g.Expect(err).NotTo(HaveOccurred())
	code, _ = exchange(t, e, id, cfg.Ticket, "attacker")
	g.Expect(code).To(Equal(http.StatusConflict))
	code, body = testenv.Call(t, http.MethodGet, e.DeployURL+"/deploy/v1/hosts/"+id+"/instructions", cfg.Ticket, nil)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a ticket is no token")
	g.Expect(body).NotTo(ContainSubstring(ignitionCanary))
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(get(g, host).Status.Conditions, baremetalhost.DeployAgentTokenCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(baremetalhost.ReasonTokenAskedAgain))
		g.Expect(c.Message).To(ContainSubstring("request " + gen + " was handed out to"))
		g.Expect(c.Message).To(ContainSubstring("asked for again 1 times"))
	}, 30*time.Second).Should(Succeed())
	evs := &eventsv1.EventList{}
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", deployserver.ReasonTokenAskedAgain), HaveField("Regarding.Name", host.Name))))

	// The host's agent goes on and finishes.
	close(img.Gate)
	waitState(t, host, metal3v1.StateProvisioned)
	disk := m.DiskByName("/dev/sda")
	cd, ok, err := configdrive.Read(disk, disk.SizeBytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(string(cd.UserData)).To(ContainSubstring(ignitionCanary), "the host got its user data")

	// The agent's own token, replayed after its request ended: nothing.
	code, body = testenv.Call(t, http.MethodGet, e.DeployURL+"/deploy/v1/hosts/"+id+"/instructions", agentToken, nil)
	g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusGone))
	g.Expect(body).NotTo(ContainSubstring(ignitionCanary))
	code, _ = testenv.Call(t, http.MethodGet, e.DeployURL+deployserver.PXEPath+mac, "", nil)
	g.Expect(code).To(Equal(http.StatusNotFound))

	// No credential in the engine's logs or Events.
	g.Expect(e.Logs.String()).NotTo(ContainSubstring(agentToken))
	g.Expect(e.Logs.String()).NotTo(ContainSubstring(cfg.Ticket))
	g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
	for _, ev := range evs.Items {
		g.Expect(ev.Note).NotTo(ContainSubstring(agentToken))
		g.Expect(ev.Note).NotTo(ContainSubstring(cfg.Ticket))
	}
}

// TestDuplicateBootMAC: a host whose spec.bootMACAddress another host (in
// another namespace) had first is not booted, with an error naming the
// field, and the first host still provisions. A hub whose admission
// webhook refuses the duplicate never gets there.
func TestDuplicateBootMAC(t *testing.T) {
	g := NewWithT(t)
	first, second := env.Namespace(t), env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 2)
	img := newImageServer(t, 1<<20, false)
	mac := lab.Machines[0].Hardware.NICs[0].MAC
	a := createHost(t, lab, 0, first, true, func(h *metal3v1.BareMetalHost) {
		h.Annotations = map[string]string{metal3v1.InspectAnnotation: metal3v1.InspectAnnotationValueDisabled}
	})
	waitState(t, a, metal3v1.StateAvailable)
	// Creation times have seconds: the second host is made in a later one
	// (within one, namespace and name decide).
	g.Eventually(func() bool { return time.Now().After(a.CreationTimestamp.Add(time.Second)) }).Should(BeTrue())
	b, secret := lab.Host(lab.Machines[1], second, true)
	b.Spec.BootMACAddress = strings.ToUpper(mac)
	b.Spec.Image, b.Spec.Online = img.Image(), true
	b.Annotations = map[string]string{metal3v1.InspectAnnotation: metal3v1.InspectAnnotationValueDisabled}
	g.Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
	if err := env.Client.Create(context.Background(), b); apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		g.Expect(err.Error()).To(ContainSubstring("bootMACAddress"))
		t.Skip("the admission webhook refuses the duplicate boot MAC")
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func() string { return string(get(g, b).Status.Provisioning.State) + ": " + b.Status.ErrorMessage }, 60*time.Second).Should(Equal(string(metal3v1.StateProvisioning) + ": " +
		"spec.bootMACAddress " + strings.ToUpper(mac) + " is also the boot MAC address of another BareMetalHost, which was there first: " +
		"this host is not booted until its spec.bootMACAddress is unique"))
	g.Expect(b.Status.ErrorType).To(Equal(metal3v1.ProvisioningError))
	g.Expect(lab.Machines[1].Boots()).To(BeZero())

	update(t, a, func(h *metal3v1.BareMetalHost) { h.Spec.Image, h.Spec.Online = img.Image(), true })
	waitState(t, a, metal3v1.StateProvisioned)
	g.Expect(get(g, b).Status.Provisioning.State).To(Equal(metal3v1.StateProvisioning))
}
