package discovery_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/agent/discovery"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// TestFromDeployInventory: the agent's inventory in the REST shape, with
// upstream's spellings and the eligibility of disks by size.
func TestFromDeployInventory(t *testing.T) {
	g := NewWithT(t)
	inv := &deployapi.Inventory{
		SystemVendor: deployapi.SystemVendor{Manufacturer: "Dell Inc.", ProductName: "PowerEdge R650", SerialNumber: "ABC123"},
		BootMode:     deployapi.BootModeUEFI,
		CPU:          deployapi.CPU{Architecture: "amd64", Model: "Intel Xeon", Count: 16, MHz: 2400},
		MemoryBytes:  64 << 30,
		NICs: []deployapi.NIC{
			{Name: "eth0", MAC: "52:54:00:aa:bb:01", SpeedMbps: 10000, HasLink: true},
			{Name: "eth1", MAC: "52:54:00:aa:bb:02"},
		},
		Disks: []deployapi.Disk{
			{Name: "/dev/sda", Model: "PERC", Vendor: "DELL", SerialNumber: "S1", WWN: "0x5000c500a1b2c3d4", HCTL: "0:0:0:0", SizeBytes: 480_103_981_056},
			{Name: "sdb", SizeBytes: 10_737_418_240, Rotational: true},
		},
	}
	g.Expect(discovery.FromDeployInventory(inv, "host-0")).To(Equal(&assistedapi.Inventory{
		Hostname: "host-0",
		Memory:   assistedapi.Memory{PhysicalBytes: 64 << 30, UsableBytes: 64 << 30},
		CPU:      assistedapi.CPU{Count: 16, Architecture: "x86_64", ModelName: "Intel Xeon", Frequency: 2400},
		Interfaces: []assistedapi.Interface{
			{Name: "eth0", MacAddress: "52:54:00:aa:bb:01", HasCarrier: true, SpeedMbps: 10000, IPV4Addresses: []string{}, IPV6Addresses: []string{}, Type: "physical"},
			{Name: "eth1", MacAddress: "52:54:00:aa:bb:02", IPV4Addresses: []string{}, IPV6Addresses: []string{}, Type: "physical"},
		},
		Disks: []assistedapi.Disk{{
			ID: "/dev/sda", Name: "sda", Path: "/dev/sda", DriveType: assistedapi.DriveTypeSSD, Hctl: "0:0:0:0", Model: "PERC",
			Vendor: "DELL", Serial: "S1", Wwn: "0x5000c500a1b2c3d4", SizeBytes: 480_103_981_056,
			InstallationEligibility: assistedapi.InstallationEligibility{Eligible: true, NotEligibleReasons: []string{}},
		}, {
			ID: "/dev/sdb", Name: "sdb", Path: "/dev/sdb", DriveType: assistedapi.DriveTypeHDD, SizeBytes: 10_737_418_240,
			InstallationEligibility: assistedapi.InstallationEligibility{NotEligibleReasons: []string{
				"Disk is too small (disk only has 10.7 GB, but 20 GB are required)",
			}},
		}},
		Boot:         assistedapi.Boot{CurrentBootMode: "uefi"},
		SystemVendor: assistedapi.SystemVendor{Manufacturer: "Dell Inc.", ProductName: "PowerEdge R650", SerialNumber: "ABC123"},
	}))

	inv.BootMode = deployapi.BootModeLegacy
	g.Expect(discovery.FromDeployInventory(inv, "").Boot.CurrentBootMode).To(Equal("bios"))
}

// TestStaticNetwork: the NMStateConfig whose MAC addresses the machine has
// applies, its interfaces matched by MAC address.
func TestStaticNetwork(t *testing.T) {
	g := NewWithT(t)
	hosts := []deployapi.StaticNetworkHost{{
		MACInterfaceMap: []deployapi.MACInterface{{MACAddress: "52:54:00:00:00:01", LogicalNICName: "eth0"}},
		NetworkYAML:     "interfaces:\n- name: eth0\n  type: ethernet\n  ipv4: {enabled: true, address: [{ip: 192.0.2.10, prefix-length: 24}]}\n",
	}, {
		MACInterfaceMap: []deployapi.MACInterface{{MACAddress: "52:54:00:00:00:02", LogicalNICName: "ens3"}},
		NetworkYAML:     "interfaces:\n- name: ens3\n  type: ethernet\n  ipv4: {enabled: true, address: [{ip: 192.0.2.11, prefix-length: 24}]}\n",
	}}
	cfg, err := discovery.StaticNetwork(hosts, []string{"52:54:00:AA:00:09", "52:54:00:00:00:02"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Interfaces).To(HaveLen(1))
	g.Expect(cfg.Interfaces[0].Name).To(Equal("ens3"))
	g.Expect(cfg.Interfaces[0].MACAddress).To(Equal("52:54:00:00:00:02"))
	g.Expect(cfg.Interfaces[0].IPv4.Address[0].IP).To(Equal("192.0.2.11"))

	cfg, err = discovery.StaticNetwork(hosts, []string{"52:54:00:aa:00:09"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(BeNil(), "no host of the InfraEnv has this machine's MAC addresses")

	_, err = discovery.StaticNetwork([]deployapi.StaticNetworkHost{{MACInterfaceMap: hosts[0].MACInterfaceMap, NetworkYAML: "foo: bar\n"}}, []string{"52:54:00:00:00:01"})
	g.Expect(err).To(MatchError(HavePrefix("staticNetwork[0]: network data has no interfaces")))
}

// TestUnsetHostname: a machine whose kernel hostname is unset reports
// localhost, as a system with systemd does.
func TestUnsetHostname(t *testing.T) {
	for _, h := range []string{"", "(none)"} {
		if got := discovery.FromDeployInventory(&deployapi.Inventory{}, h).Hostname; got != "localhost" {
			t.Errorf("hostname %q reported as %q", h, got)
		}
	}
}
