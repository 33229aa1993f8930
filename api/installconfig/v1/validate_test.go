package installconfig

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
)

// validConfig is a valid install-config with three hosts.
func validConfig() *InstallConfig {
	ic := &InstallConfig{
		APIVersion: "v1", BaseDomain: "example.com", Metadata: Metadata{Name: "demo"},
		ControlPlane: MachinePool{Name: RoleMaster, Replicas: ptr.To[int32](1)},
		Platform:     Platform{BareMetal: &BareMetal{APIVIPs: []string{"192.0.2.10"}}},
		PullSecret:   `{"auths":{}}`,
		Metalshift:   &Metalshift{OSImage: OSImage{URL: "http://images/rhcos.raw", Checksum: "abc"}},
	}
	for i := range 3 {
		ic.Platform.BareMetal.Hosts = append(ic.Platform.BareMetal.Hosts, Host{
			Name: fmt.Sprintf("h%d", i), BootMACAddress: fmt.Sprintf("52:54:00:00:00:%02x", i),
			BMC: BMC{Address: fmt.Sprintf("redfish-virtualmedia://10.0.0.%d/redfish/v1/Systems/1", i), Username: "u", Password: "p"},
		})
	}
	return ic
}

func TestValidateHosts(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(h *Host)
		wantField  string
		wantDetail string
	}{
		{name: "valid", edit: func(*Host) {}},
		{name: "ipmi", edit: func(h *Host) { h.BMC.Address = "ipmi://10.0.0.9:6230" }},
		{name: "idrac virtual media over http", edit: func(h *Host) {
			h.BMC.Address = "idrac-virtualmedia+http://10.0.0.9/redfish/v1/Systems/System.Embedded.1"
		}},
		{name: "MAC with dashes", edit: func(h *Host) { h.BootMACAddress = "52-54-00-00-00-09" }},
		{name: "ftp", edit: func(h *Host) { h.BMC.Address = "ftp://x" },
			wantField: "platform.baremetal.hosts[2].bmc.address", wantDetail: `unsupported scheme "ftp"; supported schemes are idrac-virtualmedia, ilo5-virtualmedia, ipmi, redfish, redfish-virtualmedia`},
		{name: "no scheme", edit: func(h *Host) { h.BMC.Address = "10.0.0.9" },
			wantField: "platform.baremetal.hosts[2].bmc.address", wantDetail: "is not a URL"},
		{name: "empty address", edit: func(h *Host) { h.BMC.Address = "" },
			wantField: "platform.baremetal.hosts[2].bmc.address", wantDetail: "is not a URL"},
		{name: "bad transport", edit: func(h *Host) { h.BMC.Address = "redfish+ftp://10.0.0.9" },
			wantField: "platform.baremetal.hosts[2].bmc.address", wantDetail: `unsupported transport "ftp"`},
		{name: "credentials in the address", edit: func(h *Host) { h.BMC.Address = "redfish://u:canary-bmc-password-1@10.0.0.9" },
			wantField: "platform.baremetal.hosts[2].bmc.address", wantDetail: "must not carry a username or password"},
		{name: "not a MAC", edit: func(h *Host) { h.BootMACAddress = "nope" },
			wantField: "platform.baremetal.hosts[2].bootMACAddress", wantDetail: "must be a MAC address"},
		{name: "not an EUI-48 MAC", edit: func(h *Host) { h.BootMACAddress = "02:00:5e:10:00:00:00:01" },
			wantField: "platform.baremetal.hosts[2].bootMACAddress", wantDetail: "must be a MAC address"},
		{name: "same MAC as hosts[0], spelt otherwise", edit: func(h *Host) { h.BootMACAddress = "52-54-00-00-00-00" },
			wantField: "platform.baremetal.hosts[2].bootMACAddress", wantDetail: "also hosts[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ic := validConfig()
			tt.edit(&ic.Platform.BareMetal.Hosts[2])
			errs := ic.Validate()
			if tt.wantField == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1), "%v", errs)
			g.Expect(errs[0].Field).To(Equal(tt.wantField))
			g.Expect(errs[0].Error()).To(ContainSubstring(tt.wantDetail))
			g.Expect(errs[0].Error()).NotTo(ContainSubstring("canary"))
		})
	}
}
