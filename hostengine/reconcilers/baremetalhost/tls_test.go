package baremetalhost_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/hostenginetest"
	"github.com/metalshift/metalshift/internal/serving"
	"github.com/metalshift/metalshift/sim"
)

// startTLSEngine starts a host engine serving https with files, and plain
// http for network boot, and a lab of n machines whose BMCs and firmware
// trust labCA; it returns the boot server's URL.
func startTLSEngine(t *testing.T, files serving.TLSFiles, labCA []byte, n int) (*engine, *sim.Lab, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	boot, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := startEngine(t, ln.Addr().String(), nil, nil, func(o *hostengine.Options) {
		o.DeployListener, o.TLS, o.BootListener = ln, files, boot
	})
	bootURL := "http://" + boot.Addr().String()
	lab := sim.NewLab(sim.LabOptions{Hosts: n, Password: canary, BootURL: bootURL, CA: labCA, AgentPollInterval: 100 * time.Millisecond,
		DiskSizeBytes: 64 << 30, MACOctet: hostenginetest.NextMACOctet()})
	if err := lab.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lab.Close)
	return e, lab, bootURL
}

// TestTLS: the deploy server serves https and hands hosts its CA in their
// boot configuration. A host booted from virtual media (its BMC trusting
// the CA) and one booted over the network (iPXE on the plain http boot
// server) are inspected and provisioned, their agents verifying the
// server; the boot server serves nothing but what a network boot loads.
func TestTLS(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	files, ca := issueTLS(t)
	e, lab, bootURL := startTLSEngine(t, files, ca, 2)
	img := newImageServer(t, 1<<20, false)

	vm := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	pxe := createHost(t, lab, 1, ns, false, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	waitState(t, vm, metal3v1.StateProvisioned)
	waitState(t, pxe, metal3v1.StateProvisioned)
	for _, m := range lab.Machines {
		g.Expect(lab.Firmware.Log(m.ID)).To(ContainElement(ContainSubstring("Deploy agent started")))
	}
	g.Expect(get(g, pxe).Status.HardwareDetails).NotTo(BeNil(), "the inspection report came over https")

	// The agent API and the ISOs are not on the boot server.
	for _, path := range []string{"/deploy/v1/hosts/x/instructions", "/images/deploy.iso", "/images/deploy.ipxe", "/deploy/v1/lookup"} {
		resp, err := http.Get(bootURL + path) //nolint:noctx // a test's loopback URL
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Or(Equal(http.StatusNotFound), Equal(http.StatusMethodNotAllowed)), path)
	}
	// And the deploy server speaks nothing but TLS.
	resp, err := http.Get("http://" + e.Addr + "/images/deploy-kernel") //nolint:noctx // a test's loopback URL
	if err == nil {
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain http to the https server")
	}
}

// TestTLSWrongCA: a machine whose boot configuration carries a CA that did
// not sign the deploy server's certificate refuses the server: its agent
// never gets instructions and nothing is written.
func TestTLSWrongCA(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	files, ca := issueTLS(t)
	other, _ := issueTLS(t)
	files.CAFile = other.CAFile // what hosts are told to trust
	_, lab, _ := startTLSEngine(t, files, ca, 1)
	m := lab.Machines[0]
	img := newImageServer(t, 1<<20, false)

	host := createHost(t, lab, 0, ns, true, func(h *metal3v1.BareMetalHost) { h.Spec.Image = img.Image(); h.Spec.Online = true })
	g.Eventually(func() []string { return lab.Firmware.Log(m.ID) }, time.Minute, 100*time.Millisecond).Should(
		ContainElement(ContainSubstring("certificate signed by unknown authority")), func() string { d, _ := json.Marshal(get(g, host).Status); return string(d) })
	g.Expect(strings.Join(lab.Firmware.Log(m.ID), "\n")).To(ContainSubstring("Deploy agent started"), "the BMC, trusting the right CA, read the ISO")
	g.Expect(get(g, host).Status.Provisioning.State).To(Equal(metal3v1.StateProvisioning))
	g.Expect(img.Downloads.Load()).To(BeZero())
	for _, d := range m.Hardware.Disks {
		g.Expect(d.Writes()).To(BeZero(), d.Name)
	}
}
