package hostengine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/fault"
)

// Machines that fail while the deploy agent works: the power goes in the
// middle of the image write, the network drops during the download.

// TestProvisionUnderPowerLoss: the machine loses its power while its agent
// writes the image (half a MiB into it). The engine finds the machine off
// on its next agent poll, drops the request, says so (a DeployAgentLost
// Event and the host's error, naming the request), and provisions the
// host again for a new request, whose agent writes the whole image: each
// request's image is written once, and the disk holds the image.
func TestProvisionUnderPowerLoss(t *testing.T) {
	g := NewWithT(t)
	plan := fault.MustParse("seed=1,machine.powerloss=@1")
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	lab.BMC.SetPlan(plan)
	lab.Firmware.Faults = plan
	m := lab.Machines[0]
	img := newImageServer(t, 1<<20, false)

	host := createHost(t, lab, 0, ns, true, nil)
	waitState(t, host, metal3v1.StateAvailable)
	update(t, host, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	// Within WaitState's minute, not the agent's 30-minute timeout.
	waitState(t, host, metal3v1.StateProvisioned)
	g.Eventually(m.BootedOS, 30*time.Second).Should(Equal(sim.OSDisk))
	g.Expect(plan.Fired(fault.MachinePowerLoss)).To(Equal(1))

	console := strings.Join(lab.Firmware.Log(m.ID), "\n")
	reqs := imageWrites(g, console)
	g.Expect(reqs).To(HaveLen(2), "the lost request and the new one:\n%s", console)
	g.Expect(console).To(MatchRegexp(`(?s)Writing \S+ to /dev/sda for request `+reqs[0]+`.*Power lost while writing /dev/sda.*Writing \S+ to /dev/sda for request `+reqs[1]),
		"the new request's agent wrote the image after the power loss")
	written := make([]byte, len(img.Data))
	_, _ = m.DiskByName("/dev/sda").ReadAt(written, 0)
	g.Expect(written).To(Equal(img.Data), "the whole image is on the disk")

	// The engine said why it provisioned the host again, naming the lost
	// request; the host's error was the same message.
	lost := eventNotes(g, ns, host, "DeployAgentLost")
	g.Expect(lost).To(HaveLen(1))
	g.Expect(lost[0]).To(And(ContainSubstring("request "+reqs[0]), ContainSubstring("powered off"), ContainSubstring("agent is lost"),
		ContainSubstring("writing the image again from the start")))
	g.Expect(eventNotes(g, ns, host, "ProvisioningError")).To(ContainElement(lost[0]))
	g.Expect(get(g, host).Status.ErrorMessage).To(BeEmpty(), "provisioned: the error is cleared")
	expectNoCanary(t, e, ns, host)
}

// TestProvisionUnderDownloadDrop: the machine's network drops for 2 s a
// MiB into the image download. The agent resumes the download with a
// Range request once the network is back, the checksum of the whole image
// is verified, and the host is provisioned by the one request: the image
// is on the disk, written once.
func TestProvisionUnderDownloadDrop(t *testing.T) {
	g := NewWithT(t)
	plan := fault.MustParse("seed=1,machine.downloaddrop=@1:2s")
	ns := env.Namespace(t)
	e := startEngine(t, "", nil, nil)
	lab := startLab(t, e, 1)
	lab.BMC.SetPlan(plan)
	lab.Firmware.Faults = plan
	m := lab.Machines[0]
	img := newRangeImageServer(t, 4<<20)

	host := createHost(t, lab, 0, ns, true, nil)
	waitState(t, host, metal3v1.StateAvailable)
	update(t, host, func(h *metal3v1.BareMetalHost) {
		h.Spec.Image = &metal3v1.Image{URL: img.URL + "/os.raw", Checksum: img.sha256, ChecksumType: metal3v1.SHA256}
		h.Spec.Online = true
	})
	waitState(t, host, metal3v1.StateProvisioned)
	g.Eventually(m.BootedOS, 30*time.Second).Should(Equal(sim.OSDisk))
	g.Expect(plan.Fired(fault.MachineDownloadDrop)).To(Equal(1))

	console := strings.Join(lab.Firmware.Log(m.ID), "\n")
	g.Expect(imageWrites(g, console)).To(HaveLen(1), "one request wrote the image:\n%s", console)
	g.Expect(console).To(ContainSubstring("The image download broke off"))
	ranges := img.rangesAsked()
	g.Expect(ranges).To(HaveLen(2), "the download and its resumption")
	g.Expect(ranges[0]).To(BeEmpty())
	g.Expect(ranges[1]).To(MatchRegexp(`^bytes=[1-9][0-9]*-$`), "resumed where it broke off, not started over")
	written := make([]byte, len(img.data))
	_, _ = m.DiskByName("/dev/sda").ReadAt(written, 0)
	g.Expect(written).To(Equal(img.data), "the whole image is on the disk")
	g.Expect(eventNotes(g, ns, host, "DeployAgentLost")).To(BeEmpty())
	expectNoCanary(t, e, ns, host)
}

// rangeImageServer serves a random raw image with ranges (as a web server
// or object store does) and records the Range header of every request.
type rangeImageServer struct {
	*httptest.Server
	data   []byte
	sha256 string

	mu     sync.Mutex
	ranges []string
}

func newRangeImageServer(t *testing.T, size int) *rangeImageServer {
	s := &rangeImageServer{data: make([]byte, size)}
	_, _ = rand.Read(s.data)
	sum := sha256.Sum256(s.data)
	s.sha256 = hex.EncodeToString(sum[:])
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		s.mu.Unlock()
		w.Header().Set("ETag", `"`+s.sha256[:16]+`"`)
		http.ServeContent(w, r, "os.raw", time.Time{}, bytes.NewReader(s.data))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *rangeImageServer) rangesAsked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// imageWrites returns the requests the deploy agents on a machine wrote
// an image for, in order, from its console, and checks that no request's
// image was written twice (a disk is written at most once per request).
func imageWrites(g Gomega, console string) []string {
	var reqs []string
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^Writing \S+ to (\S+) for request (\S+)$`).FindAllStringSubmatch(console, -1) {
		g.Expect(seen).NotTo(HaveKey(m[2]), "request %s wrote its image twice:\n%s", m[2], console)
		seen[m[2]] = true
		reqs = append(reqs, m[2])
	}
	return reqs
}

// eventNotes returns the notes of the Events about host with reason.
func eventNotes(g Gomega, ns string, host *metal3v1.BareMetalHost, reason string) []string {
	evs := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), evs, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, ev := range evs.Items {
		if ev.Reason == reason && ev.Regarding.Name == host.Name {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}
