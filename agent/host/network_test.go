package host

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// TestDiscoveryFacts: the host ID is the SMBIOS UUID in lowercase; the
// default routes come from procfs.
func TestDiscoveryFacts(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	paths := Paths{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc"), Dev: filepath.Join(root, "dev")}
	write := func(path, data string) {
		g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(path, []byte(data), 0o644)).To(Succeed())
	}
	_, err := MachineUUID(paths)
	g.Expect(err).To(MatchError(ContainSubstring("reading the machine's UUID")))
	write(filepath.Join(paths.Sys, "class/dmi/id/product_uuid"), "0C6B3E9A-2F4D-4B8E-9A1C-7D5E6F708192\n")
	g.Expect(MachineUUID(paths)).To(Equal("0c6b3e9a-2f4d-4b8e-9a1c-7d5e6f708192"))

	write(filepath.Join(paths.Proc, "net/route"), "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
		"eth0\t00000000\t0102000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"+
		"eth0\t0002000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n")
	write(filepath.Join(paths.Proc, "net/ipv6_route"),
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n"+
			"00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n")
	g.Expect(DefaultRoutes(paths)).To(Equal([]assistedapi.Route{
		{Interface: "eth0", Destination: "0.0.0.0", Gateway: "10.0.2.1", Family: 2},
		{Interface: "eth0", Destination: "::", Gateway: "fe80::1", Family: 10},
	}))
}
