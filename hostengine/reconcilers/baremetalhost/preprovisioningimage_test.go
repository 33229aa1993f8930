package baremetalhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/shard"
)

// ppiServer serves one ISO for many hosts, as a PreprovisioningImage
// provider does: no host ID, a lookup section with a credential for its
// path.
type ppiServer struct {
	*httptest.Server
	downloads atomic.Int32
	// broken, when set, fails every download: a host booting the image
	// runs no agent.
	broken atomic.Bool
}

const ppiPath = "/provider/image.iso"

func newPPIServer(t *testing.T, e *engine) *ppiServer {
	t.Helper()
	im, err := imageservice.LightImages()
	if err != nil {
		t.Fatal(err)
	}
	cfg := deployapi.BootConfig{Lookup: &deployapi.Lookup{EngineURL: e.DeployURL, Scope: ppiPath, Token: deployapi.SignLookupToken(e.Key, ppiPath, time.Now().Add(time.Hour))}}
	s := &ppiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ppiPath {
			http.NotFound(w, r)
			return
		}
		s.downloads.Add(1)
		if s.broken.Load() {
			http.Error(w, "broken", http.StatusServiceUnavailable)
			return
		}
		iso, err := im.ISO(cfg)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		http.ServeContent(w, r, "image.iso", im.ModTime, iso)
	}))
	t.Cleanup(s.Close)
	return s
}

func setImageReady(t *testing.T, ppi *metal3v1.PreprovisioningImage, status metav1.ConditionStatus, reason, msg, url string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ppi), ppi); err != nil {
			return err
		}
		ppi.Status.ImageUrl, ppi.Status.Format = url, metal3v1.ImageFormatISO
		meta.SetStatusCondition(&ppi.Status.Conditions, metav1.Condition{Type: metal3v1.ImageReadyCondition, Status: status, Reason: reason, Message: msg})
		return env.Client.Status().Update(context.Background(), ppi)
	}).Should(Succeed())
}

// TestPreprovisioningImage: the engine makes a PreprovisioningImage per
// host, owned by it. A host labelled for a provider waits for its claim;
// Ready False keeps it waiting with the provider's reason; Ready True makes
// the engine boot the provider's ISO, whose agent finds its host by MAC at
// the deploy server and inspects it in-band. A custom deploy without an
// image runs in that image: one the image does not provide fails with the
// agent's message.
func TestPreprovisioningImage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	provider := newPPIServer(t, e)

	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Labels = map[string]string{"infraenvs.agent-install.openshift.io": "somewhere", shard.Label: "a"}
	})
	ppi := &metal3v1.PreprovisioningImage{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(host), ppi) }, 30*time.Second).Should(Succeed())
	g.Expect(metav1.IsControlledBy(ppi, get(g, host))).To(BeTrue())
	g.Expect(ppi.Labels).To(HaveKeyWithValue(shard.Label, "a"), "its host's shard, whose provider serves it")
	g.Expect(ppi.Spec.AcceptFormats).To(ConsistOf(metal3v1.ImageFormatISO))

	// Labelled for a provider: it waits for the claim.
	g.Eventually(func() string {
		c := meta.FindStatusCondition(get(g, host).Status.Conditions, baremetalhost.DeployAgentBootedCondition)
		if c == nil {
			return ""
		}
		return c.Reason + ": " + c.Message
	}, 30*time.Second).Should(Equal(baremetalhost.ReasonWaitingForImage + ": Waiting for a provider of PreprovisioningImage " + host.Name + " (the host is labelled for one)"))
	g.Expect(host.Status.Provisioning.State).To(Equal(metal3v1.StateInspecting))

	setImageReady(t, ppi, metav1.ConditionFalse, "WaitingForInfraEnvImageToBeCreated", "Waiting for the image", "")
	g.Eventually(func() string {
		return meta.FindStatusCondition(get(g, host).Status.Conditions, baremetalhost.DeployAgentBootedCondition).Message
	}, 30*time.Second).Should(Equal("Waiting for PreprovisioningImage " + host.Name + ": WaitingForInfraEnvImageToBeCreated: Waiting for the image"))
	g.Expect(provider.downloads.Load()).To(BeZero())

	setImageReady(t, ppi, metav1.ConditionTrue, "Ready", "", provider.URL+ppiPath+"?signature=x")
	waitState(t, host, metal3v1.StateAvailable)
	g.Expect(provider.downloads.Load()).NotTo(BeZero(), "the host booted the provider's image")
	g.Expect(lab.Firmware.Log(m.ID)).To(ContainElement(ContainSubstring("Looked up host")))
	g.Expect(meta.FindStatusCondition(host.Status.Conditions, baremetalhost.DeployAgentBootedCondition).Reason).To(Equal("Inspected"))
	g.Expect(host.Status.HardwareDetails).NotTo(BeNil())
	g.Expect(host.Status.HardwareDetails.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)))

	// A custom deploy the image does not provide fails.
	update(t, host, func(h *metal3v1.BareMetalHost) {
		h.Spec.CustomDeploy = &metal3v1.CustomDeploy{Method: deployapi.MethodStartAssistedInstall}
		h.Spec.Online = true
	})
	g.Eventually(func() string { return get(g, host).Status.ErrorMessage }, 60*time.Second).Should(Equal(
		`The deploy agent failed: custom deploy method "start_assisted_install": this image provides no custom deploy methods`))
	g.Expect(host.Status.Provisioning.State).To(Equal(metal3v1.StateProvisioning))
}

// TestLookup: the deploy server answers a lookup only with a credential
// for the image that has not expired, for a host whose PreprovisioningImage
// serves it, and only while the engine boots that host for its current
// request and the request's agent token was not handed out; the answer
// carries the request's ticket, not a token.
func TestLookup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	m := lab.Machines[0]
	provider := newPPIServer(t, e)
	provider.broken.Store(true) // the machine boots no agent: the test plays it
	img := newImageServer(t, 1<<20, false)
	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) {
		h.Annotations = map[string]string{metal3v1.InspectAnnotation: metal3v1.InspectAnnotationValueDisabled}
	})
	waitState(t, host, metal3v1.StateAvailable)
	lookup := func(scope, token string, macs ...string) (int, string) {
		body, _ := json.Marshal(deployapi.LookupRequest{Scope: scope, Token: token, MACs: macs})
		resp, err := http.Post(e.DeployURL+deployapi.LookupPath, "application/json", bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	good := deployapi.SignLookupToken(e.Key, ppiPath, time.Now().Add(time.Hour))
	code, _ := lookup(ppiPath, deployapi.SignLookupToken(e.Key, "/other.iso", time.Now().Add(time.Hour)), m.Hardware.NICs[0].MAC)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "another image's credential")
	code, msg := lookup(ppiPath, deployapi.SignLookupToken(e.Key, ppiPath, time.Now().Add(-time.Minute)), m.Hardware.NICs[0].MAC)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "an expired credential")
	g.Expect(msg).To(ContainSubstring("the image's URL has expired"))
	code, msg = lookup(ppiPath, good, m.Hardware.NICs[0].MAC)
	g.Expect(code).To(Equal(http.StatusNotFound), "its PreprovisioningImage serves no image")
	g.Expect(msg).To(ContainSubstring("boots this image: it is booted by the host engine for a host whose PreprovisioningImage serves it, not by hand"))

	ppi := &metal3v1.PreprovisioningImage{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(host), ppi) }, 30*time.Second).Should(Succeed())
	setImageReady(t, ppi, metav1.ConditionTrue, "Ready", "", provider.URL+ppiPath+"?x=1")
	// The deploy server reads the PreprovisioningImage from the manager's
	// cache, which sees the new status a moment later; the host has no
	// request, so it is not booting the image.
	g.Eventually(func() string {
		code, msg = lookup(ppiPath, good, "00:00:00:00:00:01", m.Hardware.NICs[0].MAC)
		return msg
	}, 30*time.Second, 100*time.Millisecond).Should(ContainSubstring("boots this image now"))
	g.Expect(code).To(Equal(http.StatusNotFound))

	// A deploy: the engine boots the image; the machine cannot read it.
	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image, h.Spec.Online = img.Image(), true })
	g.Eventually(func(g Gomega) {
		h := get(g, host)
		g.Expect(h.Status.DeployAgent).NotTo(BeNil())
		g.Expect(h.Status.DeployAgent.Request.BootedAt).NotTo(BeNil())
	}, 30*time.Second).Should(Succeed())
	gen := host.Status.DeployAgent.Request.Generation
	g.Eventually(func() int {
		code, msg = lookup(ppiPath, good, "00:00:00:00:00:01", m.Hardware.NICs[0].MAC)
		return code
	}, 30*time.Second, 100*time.Millisecond).Should(Equal(http.StatusOK), func() string { return msg })
	var cfg deployapi.BootConfig
	g.Expect(json.Unmarshal([]byte(msg), &cfg)).To(Succeed())
	g.Expect(cfg.HostID).To(HavePrefix(ns + "~" + host.Name + "~"))
	g.Expect(cfg.EngineURL).To(Equal(e.DeployURL))
	g.Expect(msg).NotTo(ContainSubstring(`"token"`), "a ticket, not a token")
	ticketGen, err := deployapi.VerifyTicket(e.Key, cfg.HostID, cfg.Ticket, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ticketGen).To(Equal(gen), "for the host's current request")
	code, _ = lookup(ppiPath, good, "00:00:00:00:00:01")
	g.Expect(code).To(Equal(http.StatusNotFound))

	// Once the ticket is exchanged, a lookup gets nothing.
	code, _ = exchange(t, e, cfg.HostID, cfg.Ticket, "session-1")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Eventually(func() int {
		code, msg = lookup(ppiPath, good, m.Hardware.NICs[0].MAC)
		return code
	}, 30*time.Second, 100*time.Millisecond).Should(Equal(http.StatusConflict), func() string { return msg })
	g.Expect(msg).To(ContainSubstring("has its token already"))
}
