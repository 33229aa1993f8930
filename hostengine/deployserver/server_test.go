package deployserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

var key = []byte("0123456789abcdef0123456789abcdef")

// userData is what an attacker is after: the bootstrap Machine's pointer
// Ignition, with the ignition server's token.
const userData = `{"ignition":{"version":"3.4.0"},"secret":"ignition-bearer-canary"}`

// deployServer serves a Server on a loopback port. The server reads hosts
// directly, as a hub whose cache has caught up does.
func deployServer(t *testing.T) (*deployserver.Server, string) {
	t.Helper()
	s, err := deployserver.New(deployserver.Options{Client: env.Client, Key: key, BaseURL: "http://deploy.example:6180",
		Recorder: env.Manager.GetEventRecorder("deploy-server-test")})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// newHost makes a host with a deploy request of generation gen whose
// deploy image the engine is booting, and its user data.
func newHost(t *testing.T, ns, name, mac, gen string) *metal3v1.BareMetalHost {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-user-data"}, StringData: map[string]string{"userData": userData}}
	g.Expect(env.Client.Create(ctx, ud)).To(Succeed())
	host := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3v1.BareMetalHostSpec{BootMACAddress: mac, Online: true, UserData: &corev1.SecretReference{Name: ud.Name},
			BMC:   metal3v1.BMCDetails{Address: "redfish://192.0.2.1/redfish/v1/Systems/1", CredentialsName: "bmc"},
			Image: &metal3v1.Image{URL: "http://images.example.com/rhcos.raw", Checksum: strings.Repeat("a", 64), ChecksumType: metal3v1.SHA256}}}
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())
	setRequest(t, host, gen, true)
	return host
}

// setRequest writes a new request, as the engine does: report and token
// of the last one are gone.
func setRequest(t *testing.T, host *metal3v1.BareMetalHost, gen string, booting bool) {
	t.Helper()
	editStatus(t, host, func(h *metal3v1.BareMetalHost) {
		req := &metal3v1.DeployAgentRequest{Action: deployapi.ActionDeploy, Generation: gen, Image: h.Spec.Image.DeepCopy()}
		if booting {
			now := metav1.Now()
			req.BootStartedAt = &now
		}
		h.Status.DeployAgent = &metal3v1.DeployAgentStatus{Request: req}
	})
}

func editStatus(t *testing.T, host *metal3v1.BareMetalHost, edit func(*metal3v1.BareMetalHost)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(host), host); err != nil {
			return err
		}
		edit(host)
		return env.Client.Status().Update(context.Background(), host)
	}).Should(Succeed())
}

func get(g Gomega, host *metal3v1.BareMetalHost) *metal3v1.BareMetalHost {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(host), host)).To(Succeed())
	return host
}

func exchange(t *testing.T, base, id, ticket, session string) (int, deployapi.TokenResponse) {
	t.Helper()
	body, _ := json.Marshal(deployapi.TokenRequest{Session: session})
	code, out := testenv.Call(t, http.MethodPost, base+"/deploy/v1/hosts/"+id+"/token", ticket, body)
	var tr deployapi.TokenResponse
	if code == http.StatusOK {
		NewWithT(t).Expect(json.Unmarshal([]byte(out), &tr)).To(Succeed())
	}
	return code, tr
}

func instructions(t *testing.T, base, id, token string) (int, string) {
	return testenv.Call(t, http.MethodGet, base+"/deploy/v1/hosts/"+id+"/instructions", token, nil)
}

func report(t *testing.T, base, id, token string, rep deployapi.StatusReport) (int, string) {
	body, _ := json.Marshal(rep)
	return testenv.Call(t, http.MethodPost, base+"/deploy/v1/hosts/"+id+"/status", token, body)
}

// TestTokenIsHandedOutOnce plays the agent and an attacker holding the
// same ticket: the first exchange gets the request's token (recorded
// hashed), the second gets 409, an Event and a refusal in the status; the
// agent asking again before it reported (its answer lost) gets a new token
// that replaces the first, and 409 once it has reported; the token reads the instructions until the request's report is final, and
// no credential of another request, host or key reads anything.
func TestTokenIsHandedOutOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	_, base := deployServer(t)
	host := newHost(t, ns, "host-a", "52:54:00:aa:00:01", "0000000000000001")
	id := deployserver.HostID(host)
	ticket := deployapi.SignTicket(key, id, "0000000000000001", time.Now().Add(time.Hour))

	code, tr := exchange(t, base, id, ticket, "agent-session")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(tr.Generation).To(Equal("0000000000000001"))
	rec := get(g, host).Status.DeployAgent.Token
	g.Expect(rec).NotTo(BeNil())
	g.Expect(rec.SHA256).To(Equal(deployapi.HashAgentToken(tr.Token)))
	g.Expect(rec.Session).To(Equal("agent-session"))
	g.Expect(rec.Source).To(HavePrefix("127.0.0.1:"))
	status, _ := json.Marshal(host.Status)
	g.Expect(string(status)).NotTo(ContainSubstring(tr.Token), "only the hash is kept")

	// The attacker, with the same ticket: nothing, and it is seen.
	code, _ = exchange(t, base, id, ticket, "attacker-session")
	g.Expect(code).To(Equal(http.StatusConflict))
	g.Expect(get(g, host).Status.DeployAgent.Token.Refusals).To(BeEquivalentTo(1))
	g.Expect(host.Status.DeployAgent.Token.LastRefusalSource).To(HavePrefix("127.0.0.1:"))
	g.Expect(host.Status.DeployAgent.Token.SHA256).To(Equal(rec.SHA256), "the agent's token stays")
	g.Eventually(func(g Gomega) {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		g.Expect(evs.Items).To(ContainElement(And(HaveField("Reason", deployserver.ReasonTokenAskedAgain), HaveField("Type", corev1.EventTypeWarning),
			HaveField("Regarding.Name", host.Name), HaveField("Note", ContainSubstring("was asked for again")))))
		for _, ev := range evs.Items {
			g.Expect(ev.Note).NotTo(ContainSubstring(tr.Token))
		}
	}).Should(Succeed())
	// The agent's answer was lost (the replica died after writing the
	// record, or the connection broke): the same session asks again before
	// it has reported and gets a new token; the first opens nothing now.
	code, again := exchange(t, base, id, ticket, "agent-session")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(again.Token).NotTo(Equal(tr.Token))
	g.Expect(get(g, host).Status.DeployAgent.Token.SHA256).To(Equal(deployapi.HashAgentToken(again.Token)))
	g.Expect(host.Status.DeployAgent.Token.Refusals).To(BeEquivalentTo(1), "the attacker's ask stays counted")
	g.Eventually(func() int { code, _ := instructions(t, base, id, tr.Token); return code }).Should(Equal(http.StatusUnauthorized), "the lost token is replaced")
	rec, tr = host.Status.DeployAgent.Token, again
	g.Eventually(func() int { code, _ := instructions(t, base, id, tr.Token); return code }).Should(Equal(http.StatusOK))

	// The ticket is no token, and tokens are exact.
	for name, bad := range map[string]string{"no credential": "", "the ticket": ticket, "the hash": rec.SHA256,
		"a changed token": tr.Token[:len(tr.Token)-1] + "x", "a made-up token": "0123456789abcdef0123456789abcdef0123456789a"} {
		code, body := instructions(t, base, id, bad)
		g.Expect(code).To(Equal(http.StatusUnauthorized), name)
		g.Expect(body).NotTo(ContainSubstring("canary"), name)
	}

	// The agent: instructions with the user data; reports of its session only.
	code, body := instructions(t, base, id, tr.Token)
	g.Expect(code).To(Equal(http.StatusOK))
	var ins deployapi.Instructions
	g.Expect(json.Unmarshal([]byte(body), &ins)).To(Succeed())
	g.Expect(string(ins.UserData)).To(Equal(userData))
	running := deployapi.StatusReport{Action: deployapi.ActionDeploy, Generation: tr.Generation, Phase: deployapi.PhaseRunning, Session: "attacker-session"}
	code, _ = report(t, base, id, tr.Token, running)
	g.Expect(code).To(Equal(http.StatusConflict), "a session the token was not handed to")
	running.Session = "agent-session"
	code, _ = report(t, base, id, tr.Token, running)
	g.Expect(code).To(Equal(http.StatusAccepted))
	// The agent's heartbeat while it writes: its progress is recorded.
	beat := running
	beat.BytesWritten = 1 << 20
	code, _ = report(t, base, id, tr.Token, beat)
	g.Expect(code).To(Equal(http.StatusAccepted))
	g.Expect(get(g, host).Status.DeployAgent.Report.BytesWritten).To(BeEquivalentTo(1<<20), "a heartbeat's progress is recorded")
	code, _ = exchange(t, base, id, ticket, "agent-session")
	g.Expect(code).To(Equal(http.StatusConflict), "once the session has reported, its token is not handed out again")
	done := running
	done.Phase, done.RootDevice = deployapi.PhaseDone, "/dev/sda"
	code, _ = report(t, base, id, tr.Token, done)
	g.Expect(code).To(Equal(http.StatusAccepted))

	// Replayed after the report is final: refused.
	code, body = instructions(t, base, id, tr.Token)
	g.Expect(code).To(Equal(http.StatusGone))
	g.Expect(body).NotTo(ContainSubstring("canary"))
	code, _ = report(t, base, id, tr.Token, done)
	g.Expect(code).To(Equal(http.StatusGone))
	code, _ = exchange(t, base, id, ticket, "agent-session")
	g.Expect(code).To(Equal(http.StatusGone))

	// Request N+1: request N's token and ticket get nothing.
	setRequest(t, host, "0000000000000002", true)
	code, _ = instructions(t, base, id, tr.Token)
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = exchange(t, base, id, ticket, "agent-session-2")
	g.Expect(code).To(Equal(http.StatusGone))
	code, tr2 := exchange(t, base, id, deployapi.SignTicket(key, id, "0000000000000002", time.Now().Add(time.Hour)), "agent-session-2")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = instructions(t, base, id, tr2.Token)
	g.Expect(code).To(Equal(http.StatusOK))

	// The request is gone (the engine dropped it): nothing.
	editStatus(t, host, func(h *metal3v1.BareMetalHost) { h.Status.DeployAgent = nil })
	code, _ = instructions(t, base, id, tr2.Token)
	g.Expect(code).To(Equal(http.StatusUnauthorized))
}

// TestOtherCredentials: another host's token or ticket, forged, expired
// and malformed tickets, and oversized or empty token requests get nothing.
func TestOtherCredentials(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	_, base := deployServer(t)
	a := newHost(t, ns, "host-a", "52:54:00:bb:00:01", "00000000000000a1")
	b := newHost(t, ns, "host-b", "52:54:00:bb:00:02", "00000000000000b1")
	idA, idB := deployserver.HostID(a), deployserver.HostID(b)
	ticketA := deployapi.SignTicket(key, idA, "00000000000000a1", time.Now().Add(time.Hour))
	code, trA := exchange(t, base, idA, ticketA, "s-a")
	g.Expect(code).To(Equal(http.StatusOK))

	code, body := instructions(t, base, idB, trA.Token)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "host A's token on host B: %s", body)
	code, _ = exchange(t, base, idB, ticketA, "s-x")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "host A's ticket for host B")
	code, _ = exchange(t, base, idB, deployapi.SignTicket(key, idB, "00000000000000a1", time.Now().Add(time.Hour)), "s-x")
	g.Expect(code).To(Equal(http.StatusGone), "host A's request on host B")

	for name, ticket := range map[string]string{
		"forged (another key)": deployapi.SignTicket([]byte("an attacker's own key, 32 bytes!"), idB, "00000000000000b1", time.Now().Add(time.Hour)),
		"expired":              deployapi.SignTicket(key, idB, "00000000000000b1", time.Now().Add(-time.Second)),
		"later expiry":         strings.Replace(deployapi.SignTicket(key, idB, "00000000000000b1", time.Now().Add(time.Hour)), ".", ".9", 1),
		"malformed":            "not-a-ticket",
		"none":                 "",
	} {
		code, _ := exchange(t, base, idB, ticket, "s-x")
		g.Expect(code).To(Equal(http.StatusUnauthorized), name)
	}
	g.Expect(get(g, b).Status.DeployAgent.Token).To(BeNil(), "nothing was handed out for host B")

	ticketB := deployapi.SignTicket(key, idB, "00000000000000b1", time.Now().Add(time.Hour))
	code, _ = testenv.Call(t, http.MethodPost, base+"/deploy/v1/hosts/"+idB+"/token", ticketB, bytes.Repeat([]byte("x"), 1<<20))
	g.Expect(code).To(Equal(http.StatusBadRequest), "an oversized body")
	code, _ = exchange(t, base, idB, ticketB, strings.Repeat("s", deployapi.MaxSessionLength+1))
	g.Expect(code).To(Equal(http.StatusBadRequest), "an oversized session")
	code, _ = exchange(t, base, idB, ticketB, "")
	g.Expect(code).To(Equal(http.StatusBadRequest), "no session")
	g.Expect(get(g, b).Status.DeployAgent.Token).To(BeNil())

	// A host not being booted yet still honours a ticket the engine made
	// for it (a BMC boots virtual media before the engine records it).
	setRequest(t, b, "00000000000000b2", false)
	code, _ = exchange(t, base, idB, deployapi.SignTicket(key, idB, "00000000000000b2", time.Now().Add(time.Hour)), "s-b")
	g.Expect(code).To(Equal(http.StatusOK))
}

// TestImageURLs: image URLs are served only for the request they were
// signed for, while it is the host's current one; the iPXE script and host
// initrd (with the ticket) only until the token is handed out.
func TestImageURLs(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	s, base := deployServer(t)
	host := newHost(t, ns, "host-a", "52:54:00:cc:00:01", "00000000000000c1")
	id := deployserver.HostID(host)
	urls := s.DeployImage(get(g, host))
	local := func(raw string) string { return strings.Replace(raw, "http://deploy.example:6180", base, 1) }

	code, script := testenv.Call(t, http.MethodGet, local(urls.IPXEURL), "", nil)
	g.Expect(code).To(Equal(http.StatusOK))
	boot, err := imageservice.ParseIPXEScript(script)
	g.Expect(err).NotTo(HaveOccurred())
	var hostInitrd string
	for _, in := range boot.Initrds {
		if in.Name == "host.img" {
			hostInitrd = local(in.URL)
		}
	}
	g.Expect(hostInitrd).NotTo(BeEmpty())
	ticket := ticketOf(t, hostInitrd)
	gen, err := deployapi.VerifyTicket(key, id, ticket, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gen).To(Equal("00000000000000c1"))

	// Forged and expired URLs.
	for name, edit := range map[string]func(*url.URL, url.Values){
		"another host":    func(_ *url.URL, v url.Values) { v.Set("host", "other~host~1") },
		"another request": func(_ *url.URL, v url.Values) { v.Set("gen", "00000000000000c2") },
		"a later expiry":  func(_ *url.URL, v url.Values) { v.Set("expires", "99999999999") },
		"no signature":    func(_ *url.URL, v url.Values) { v.Del("signature") },
		"another path":    func(u *url.URL, _ url.Values) { u.Path = deployserver.ISOPath },
	} {
		u, _ := url.Parse(hostInitrd)
		v := u.Query()
		edit(u, v)
		u.RawQuery = v.Encode()
		code, _ := testenv.Call(t, http.MethodGet, u.String(), "", nil)
		g.Expect(code).To(Equal(http.StatusForbidden), name)
	}
	expired, _ := url.Parse(base + deployserver.HostInitrdPath + "?" + deployapi.SignHostURLQuery(key, deployserver.HostInitrdPath, id, "00000000000000c1", time.Now().Add(-time.Second)))
	code, _ = testenv.Call(t, http.MethodGet, expired.String(), "", nil)
	g.Expect(code).To(Equal(http.StatusForbidden), "expired")

	// The token is handed out: the boot configuration is not served again;
	// the ISO is, as a BMC reads it for the whole boot (its ticket is spent).
	code, _ = exchange(t, base, id, ticket, "s")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = testenv.Call(t, http.MethodGet, hostInitrd, "", nil)
	g.Expect(code).To(Equal(http.StatusGone))
	code, _ = testenv.Call(t, http.MethodGet, local(urls.IPXEURL), "", nil)
	g.Expect(code).To(Equal(http.StatusGone))
	code, _ = testenv.Call(t, http.MethodGet, local(urls.ISOURL), "", nil)
	g.Expect(code).To(Equal(http.StatusOK))

	// The next request: the last one's URLs are not served.
	setRequest(t, host, "00000000000000c2", true)
	for _, raw := range []string{urls.ISOURL, urls.IPXEURL} {
		code, _ = testenv.Call(t, http.MethodGet, local(raw), "", nil)
		g.Expect(code).To(Equal(http.StatusGone), raw)
	}
}

// ticketOf downloads a host initrd and reads the ticket in it.
func ticketOf(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	data, _ := io.ReadAll(resp.Body)
	cfg, err := imageservice.ReadHostInitrd(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Ticket
}

// TestByMAC: a network-booting machine gets the script of its host's
// current request only while the engine boots it and the request's token
// was not handed out.
func TestByMAC(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	_, base := deployServer(t)
	mac := "52:54:00:dd:00:01"
	host := newHost(t, ns, "host-a", mac, "00000000000000d1")
	setRequest(t, host, "00000000000000d1", false)
	id := deployserver.HostID(host)

	code, body := testenv.Call(t, http.MethodGet, base+deployserver.PXEPath+mac, "", nil)
	g.Expect(code).To(Equal(http.StatusNotFound), "the engine does not boot it yet: %s", body)

	setRequest(t, host, "00000000000000d1", true)
	code, script := testenv.Call(t, http.MethodGet, base+deployserver.PXEPath+strings.ToUpper(mac), "", nil)
	g.Expect(code).To(Equal(http.StatusOK))
	boot, err := imageservice.ParseIPXEScript(script)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(boot.Initrds).NotTo(BeEmpty())
	var ticket string
	for _, in := range boot.Initrds {
		g.Expect(in.URL).To(ContainSubstring("gen=00000000000000d1"), "one boot's URLs")
		if in.Name == "host.img" {
			ticket = ticketOf(t, strings.Replace(in.URL, "http://deploy.example:6180", base, 1))
		}
	}
	gen, err := deployapi.VerifyTicket(key, id, ticket, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gen).To(Equal("00000000000000d1"))
	g.Expect(script).NotTo(ContainSubstring(ticket), "the script itself carries no credential")

	code, _ = exchange(t, base, id, ticket, "s")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = testenv.Call(t, http.MethodGet, base+deployserver.PXEPath+mac, "", nil)
	g.Expect(code).To(Equal(http.StatusNotFound), "the agent has its token")
	code, _ = testenv.Call(t, http.MethodGet, base+deployserver.PXEPath+"52:54:00:dd:00:99", "", nil)
	g.Expect(code).To(Equal(http.StatusNotFound))

	// A host booted from virtual media gets its image from its BMC alone:
	// knowing its MAC gets nothing, even while it boots.
	vmMAC := "52:54:00:dd:00:02"
	vm := newHost(t, ns, "host-vm", vmMAC, "00000000000000d2")
	base0 := vm.DeepCopy()
	vm.Spec.BMC.Address = "redfish-virtualmedia://192.0.2.1/redfish/v1/Systems/2"
	g.Expect(env.Client.Patch(context.Background(), vm, client.MergeFrom(base0))).To(Succeed())
	g.Eventually(func() int {
		code, _ := testenv.Call(t, http.MethodGet, base+deployserver.PXEPath+vmMAC, "", nil)
		return code
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusNotFound))
}

func TestByBootMAC(t *testing.T) {
	g := NewWithT(t)
	hosts := []metal3v1.BareMetalHost{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}, Spec: metal3v1.BareMetalHostSpec{BootMACAddress: "52:54:00:00:00:01"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "y"}, Spec: metal3v1.BareMetalHostSpec{BootMACAddress: "52:54:00:00:00:0A"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: "z"}, Spec: metal3v1.BareMetalHostSpec{BootMACAddress: "52:54:00:00:00:0a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: "w"}},
	}
	h, n := deployserver.ByBootMAC(hosts, "52:54:00:00:00:01")
	g.Expect(n).To(Equal(1))
	g.Expect(h.Name).To(Equal("x"))
	h, n = deployserver.ByBootMAC(hosts, "52:54:00:00:00:0a")
	g.Expect(n).To(Equal(2), "another namespace's host with the same MAC")
	g.Expect(h).To(BeNil(), "none is served")
	h, n = deployserver.ByBootMAC(hosts, "")
	g.Expect(n).To(BeZero())
	g.Expect(h).To(BeNil())
}
