package sim

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// TestLabBootModes: machines take the boot modes in turn, and legacy ones
// are addressed as LegacyBMC says.
func TestLabBootModes(t *testing.T) {
	tests := []struct {
		name         string
		legacyBMC    string
		virtualMedia bool
		// BMC address schemes and boot modes of host-0 (UEFI) and host-1 (legacy)
		schemes []string
		modes   []metal3v1.BootMode
	}{
		{name: "legacy machines as UEFI ones", virtualMedia: true,
			schemes: []string{"redfish-virtualmedia+http://", "redfish-virtualmedia+http://"}, modes: []metal3v1.BootMode{metal3v1.UEFI, metal3v1.Legacy}},
		{name: "legacy machines by Redfish", legacyBMC: LegacyBMCRedfish, virtualMedia: true,
			schemes: []string{"redfish-virtualmedia+http://", "redfish+http://"}, modes: []metal3v1.BootMode{metal3v1.UEFI, metal3v1.Legacy}},
		{name: "PXE for all", legacyBMC: LegacyBMCRedfish,
			schemes: []string{"redfish+http://", "redfish+http://"}, modes: []metal3v1.BootMode{metal3v1.UEFI, metal3v1.Legacy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l := NewLab(LabOptions{Hosts: 3, BootModes: []metal3v1.BootMode{metal3v1.UEFI, metal3v1.Legacy}, LegacyBMC: tt.legacyBMC})
			g.Expect(l.Start("127.0.0.1:0")).To(Succeed())
			defer l.Close()
			for i, m := range l.Machines[:2] {
				host, _ := l.Host(m, "ns", tt.virtualMedia)
				g.Expect(host.Spec.BMC.Address).To(HavePrefix(tt.schemes[i]), m.ID)
				g.Expect(host.Spec.BootMode).To(Equal(tt.modes[i]), m.ID)
				g.Expect(m.Override().UEFI).To(Equal(tt.modes[i] == metal3v1.UEFI), "the firmware is in the host's boot mode")
			}
			host2, _ := l.Host(l.Machines[2], "ns", tt.virtualMedia)
			g.Expect(host2.Spec.BootMode).To(Equal(metal3v1.UEFI), "the modes are taken in turn")
		})
	}
}

// TestQEMULab: a lab of QEMU machines serves their inventory as the VMs
// get it, addresses legacy machines by IPMI, and removes its temporary
// state when closed.
func TestQEMULab(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is missing (Debian: qemu-system-x86, ovmf, ipxe-qemu): no QEMU lab")
	}
	g := NewWithT(t)
	l := NewLab(LabOptions{Hosts: 2, Backend: BackendQEMU, Password: "Canary-Lab-Pa55",
		BootModes: []metal3v1.BootMode{metal3v1.UEFI, metal3v1.Legacy}, LegacyBMC: LegacyBMCIPMI})
	g.Expect(l.Start("127.0.0.1:0")).To(Succeed())
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	g.Expect(l.QEMU).NotTo(BeNil())
	g.Expect(l.Firmware).To(BeNil())

	data, err := l.Manifests("ns", true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring("address: redfish-virtualmedia+http://" + l.Endpoint() + "/redfish/v1/Systems/host-0"))
	g.Expect(string(data)).To(ContainSubstring("address: ipmi://" + l.IPMI["host-1"].Addr))
	g.Expect(strings.Count(string(data), "bootMode: legacy")).To(Equal(1))

	req, _ := http.NewRequest(http.MethodGet, "http://"+l.Endpoint()+"/redfish/v1/Systems/host-0", nil)
	req.SetBasicAuth("admin", "Canary-Lab-Pa55")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var sys struct {
		UUID             string
		ProcessorSummary struct{ Count int }
		MemorySummary    struct{ TotalSystemMemoryGiB float64 }
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&sys)).To(Succeed())
	g.Expect(sys.UUID).To(Equal(l.Machines[0].UUID))
	g.Expect(sys.ProcessorSummary.Count).To(Equal(2))
	g.Expect(sys.MemorySummary.TotalSystemMemoryGiB).To(Equal(2.0))
	g.Expect(l.Machines[0].Hardware.Disks[0].SizeBytes).To(Equal(int64(8 << 30)))

	dir := l.Opts.StateDir
	g.Expect(dir).To(BeADirectory(), "ipmi_sim keeps its files there")
	l.Close()
	closed = true
	_, err = os.Stat(dir)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the temporary state directory is removed")
}
