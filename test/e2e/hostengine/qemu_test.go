package hostengine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalshift/metalshift/agent/configdrive"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/hostenginetest"
	"github.com/metalshift/metalshift/sim"
)

// osImageServer serves the test OS image at one path per host and counts
// each path's downloads.
type osImageServer struct {
	*httptest.Server
	sha256    string
	downloads sync.Map // path → *atomic.Int32
}

func newOSImageServer(t *testing.T, file string) *osImageServer {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	s := &osImageServer{sha256: hex.EncodeToString(sum[:])}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.downloads.LoadOrStore(r.URL.Path, &atomic.Int32{})
		n.(*atomic.Int32).Add(1)
		http.ServeContent(w, r, "os.img", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *osImageServer) count(path string) int32 {
	n, ok := s.downloads.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// TestQEMUMachines provisions two QEMU virtual machines with the live
// image, as real servers: one UEFI machine over Redfish virtual media
// (its BMC fetching the ISO over https), one legacy BIOS machine over IPMI
// and PXE (iPXE from the deploy server's plain http boot port). The live
// image's agent talks to the deploy server over https, verified with the
// CA of its boot configuration, and checks the OS image it downloads over
// plain http against the checksum it got over https. Each
// goes registering → inspecting → available → provisioning → provisioned
// with hardware details that are the VM's (the IPMI one inspected in-band
// by the agent), boots its disk, whose OS mounts the config drive and
// prints the SHA-256 of the user data it was given; the image is
// downloaded once per host; deprovisioning removes the config drive.
func TestQEMUMachines(t *testing.T) {
	images := os.Getenv("METALSHIFT_IMAGES_DIR")
	if images == "" {
		t.Skip("METALSHIFT_IMAGES_DIR is not set: `make test` builds the images and sets it")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is missing: install Debian's qemu-system-x86, ovmf and ipxe-qemu (.ci/run does)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	start := time.Now()

	// The VMs reach the host's loopback at 10.0.2.2 (QEMU user networking).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	boot, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_, bootPort, _ := net.SplitHostPort(boot.Addr().String())
	files, ca := issueTLS(t, "10.0.2.2")
	e := startEngine(t, ln.Addr().String(), nil, nil, func(o *hostengine.Options) {
		o.DeployListener, o.TLS, o.DeployURL = ln, files, "https://10.0.2.2:"+port
		o.BootListener, o.BootURL = boot, "http://10.0.2.2:"+bootPort
		o.LiveImageDir = images
	})
	osImage := newOSImageServer(t, filepath.Join(images, "metalshift-testos.img"))
	_, imgPort, _ := net.SplitHostPort(strings.TrimPrefix(osImage.URL, "http://"))

	lab := sim.NewLab(sim.LabOptions{Hosts: 2, Backend: sim.BackendQEMU, Password: canary, BootURL: "http://10.0.2.2:" + bootPort, CA: ca,
		BootModes: []metal3v1.BootMode{metal3v1.UEFI, metal3v1.Legacy}, LegacyBMC: sim.LegacyBMCIPMI,
		StateDir: t.TempDir(), MACOctet: hostenginetest.NextMACOctet()})
	g.Expect(lab.Start("127.0.0.1:0")).To(Succeed())
	t.Cleanup(lab.Close)
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range lab.Machines {
				out, _ := os.ReadFile(lab.QEMU.ConsoleLog(m.ID))
				if len(out) > 4000 {
					out = out[len(out)-4000:]
				}
				t.Logf("console of %s (tail):\n%s", m.ID, out)
			}
		}
	})

	hosts := make([]*metal3v1.BareMetalHost, len(lab.Machines))
	userData := make([]string, len(lab.Machines))
	for i := range lab.Machines {
		userData[i] = fmt.Sprintf(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,host-%d"}}]}}`, i)
		ud := userDataSecret(t, ns, fmt.Sprintf("user-data-%d", i), userData[i])
		if i == 1 {
			// The legacy VM's live image gets a static address from its
			// preprovisioning network data (QEMU's user network is
			// 10.0.2.0/24, the host is 10.0.2.2), matched by MAC.
			nmstate := fmt.Sprintf("interfaces:\n- name: enp0s2\n  type: ethernet\n  mac-address: %s\n  ipv4:\n    enabled: true\n    dhcp: false\n"+
				"    address:\n    - ip: 10.0.2.15\n      prefix-length: 24\nroutes:\n  config:\n  - destination: 0.0.0.0/0\n    next-hop-address: 10.0.2.2\n"+
				"    next-hop-interface: enp0s2\n", lab.Machines[i].Hardware.NICs[0].MAC)
			g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "host-1-network", Namespace: ns},
				StringData: map[string]string{"nmstate": nmstate}})).To(Succeed())
		}
		hosts[i] = createHost(t, lab, i, ns, true, func(h *metal3v1.BareMetalHost) {
			if i == 1 {
				h.Spec.PreprovisioningNetworkDataName = "host-1-network"
			}
			h.Spec.Online = true
			h.Spec.UserData = ud
			h.Spec.Image = &metal3v1.Image{URL: fmt.Sprintf("http://10.0.2.2:%s/host-%d/os.img", imgPort, i), Checksum: osImage.sha256,
				ChecksumType: metal3v1.SHA256}
		})
	}
	g.Expect(hosts[0].Spec.BMC.Address).To(HavePrefix("redfish-virtualmedia"))
	g.Expect(hosts[0].Spec.BootMode).To(Equal(metal3v1.UEFI))
	g.Expect(hosts[1].Spec.BMC.Address).To(HavePrefix("ipmi://"))
	g.Expect(hosts[1].Spec.BootMode).To(Equal(metal3v1.Legacy))

	// Record every state each host goes through, and when it got there.
	type visit struct {
		state metal3v1.ProvisioningState
		at    time.Duration
	}
	var mu sync.Mutex
	visits := map[string][]visit{}
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go func() {
		for pollCtx.Err() == nil {
			for _, h := range hosts {
				cur := &metal3v1.BareMetalHost{}
				if env.Client.Get(pollCtx, client.ObjectKeyFromObject(h), cur) == nil {
					mu.Lock()
					v := visits[h.Name]
					if st := cur.Status.Provisioning.State; st != "" && (len(v) == 0 || v[len(v)-1].state != st) {
						visits[h.Name] = append(v, visit{st, time.Since(start).Round(time.Second)})
					}
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	states := func(name string) []metal3v1.ProvisioningState {
		mu.Lock()
		defer mu.Unlock()
		var out []metal3v1.ProvisioningState
		for _, v := range visits[name] {
			out = append(out, v.state)
		}
		return out
	}

	for _, h := range hosts {
		g.Eventually(func(g Gomega) {
			g.Expect(get(g, h).Status.Provisioning.State).To(Equal(metal3v1.StateProvisioned), "errorMessage: %s", h.Status.ErrorMessage)
		}, 10*time.Minute, time.Second).Should(Succeed())
	}
	for i, h := range hosts {
		m := lab.Machines[i]
		// The states seen (a poll may miss a short one) come in the
		// lifecycle's order, and the operation history has each step.
		g.Expect(isSubsequence(states(h.Name), []metal3v1.ProvisioningState{metal3v1.StateRegistering, metal3v1.StateInspecting,
			metal3v1.StatePreparing, metal3v1.StateAvailable, metal3v1.StateProvisioning, metal3v1.StateProvisioned})).To(BeTrue(), "%s: %v", h.Name, states(h.Name))
		g.Expect(states(h.Name)).To(ContainElement(metal3v1.StateProvisioning), h.Name)
		ops := h.Status.OperationHistory
		for _, op := range []metal3v1.OperationMetric{ops.Register, ops.Inspect, ops.Provision} {
			g.Expect(op.Start.IsZero() || op.End.IsZero()).To(BeFalse(), "%s: %+v", h.Name, ops)
		}
		g.Expect(ops.Register.End.Time).NotTo(BeTemporally(">", ops.Inspect.Start.Time), h.Name)
		g.Expect(ops.Inspect.End.Time).NotTo(BeTemporally(">", ops.Provision.Start.Time), h.Name)
		hw := h.Status.HardwareDetails
		g.Expect(hw).NotTo(BeNil())
		g.Expect(hw.CPU.Count).To(Equal(m.Hardware.CPUCount), h.Name)
		g.Expect(hw.RAMMebibytes).To(Equal(m.Hardware.RAMMiB), h.Name)
		g.Expect(hw.NIC).To(ContainElement(HaveField("MAC", m.Hardware.NICs[0].MAC)), h.Name)
		g.Expect(hw.Storage).To(ContainElement(HaveField("SizeBytes", metal3v1.Capacity(m.Hardware.Disks[0].SizeBytes))), h.Name)
		g.Expect(hw.SystemVendor.SerialNumber).To(Equal(m.Hardware.SerialNumber), h.Name)
	}

	console := func(m string) string {
		out, _ := os.ReadFile(lab.QEMU.ConsoleLog(m))
		return string(out)
	}
	g.Expect(console(lab.Machines[0].ID)).To(MatchRegexp(`eth0 \(52:54:00:[0-9a-f:]+\): 10\.0\.2\.15/24 via 10\.0\.2\.2`), "DHCP")
	g.Expect(console(lab.Machines[1].ID)).To(ContainSubstring("10.0.2.15/24 (static, from the network data's enp0s2)"))
	for _, m := range lab.Machines {
		g.Expect(console(m.ID)).To(ContainSubstring("deploy server https://10.0.2.2:"+port), "%s: the agent used the https API", m.ID)
	}

	// Each VM boots its disk: the OS mounts the config drive and prints the
	// SHA-256 of its user data.
	for i, m := range lab.Machines {
		sum := sha256.Sum256([]byte(userData[i]))
		want := "user_data sha256 " + hex.EncodeToString(sum[:])
		g.Eventually(func() string {
			out, _ := os.ReadFile(lab.QEMU.ConsoleLog(m.ID))
			return string(out)
		}, 5*time.Minute, time.Second).Should(ContainSubstring(want), m.ID)
		t.Logf("%s: %v; booted its disk after %s", m.ID, visitsString(states(hosts[i].Name)), time.Since(start).Round(time.Second))
		g.Expect(osImage.count(fmt.Sprintf("/host-%d/os.img", i))).To(BeEquivalentTo(1), "%s: the image was downloaded once", m.ID)
	}
	mu.Lock()
	t.Logf("state timeline: %v", visits)
	mu.Unlock()

	// Deprovisioning (metadata cleaning) removes the config drive.
	for _, h := range hosts {
		update(t, h, func(h *metal3v1.BareMetalHost) { h.Spec.Image = nil; h.Spec.UserData = nil; h.Spec.Online = false })
	}
	for i, h := range hosts {
		g.Eventually(func(g Gomega) {
			g.Expect(get(g, h).Status.Provisioning.State).To(Equal(metal3v1.StateAvailable), "errorMessage: %s", h.Status.ErrorMessage)
		}, 6*time.Minute, time.Second).Should(Succeed())
		g.Eventually(lab.Machines[i].PoweredOn, time.Minute).Should(BeFalse())
		disk, err := os.Open(filepath.Join(lab.QEMU.Dir(lab.Machines[i].ID), "disk0.raw"))
		g.Expect(err).NotTo(HaveOccurred())
		st, _ := disk.Stat()
		_, found, err := configdrive.Read(disk, st.Size())
		disk.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeFalse(), "%s: cleaning removed the config drive", h.Name)
	}
	t.Logf("deprovisioned after %s", time.Since(start).Round(time.Second))
	expectNoCanary(t, e, ns, hosts...)
}

// isSubsequence tells whether every element of got appears in want, in
// want's order.
func isSubsequence(got, want []metal3v1.ProvisioningState) bool {
	i := 0
	for _, g := range got {
		for i < len(want) && want[i] != g {
			i++
		}
		if i == len(want) {
			return false
		}
	}
	return true
}

func visitsString(s []metal3v1.ProvisioningState) string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return strings.Join(out, " → ")
}
