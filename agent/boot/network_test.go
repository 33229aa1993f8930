package boot

import (
	"testing"

	. "github.com/onsi/gomega"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

func TestParseNetworkConfig(t *testing.T) {
	g := NewWithT(t)
	cfg, err := deployapi.ParseNetworkConfig([]byte(`
interfaces:
- name: enp1s0
  type: ethernet
  state: up
  mac-address: 52:54:00:AA:BB:01
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: 192.0.2.10
      prefix-length: 24
- name: enp2s0
  type: ethernet
  ipv4: {enabled: true, dhcp: true}
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 192.0.2.1
    next-hop-interface: enp1s0
dns-resolver:
  config:
    server: [192.0.2.53]
`))
	g.Expect(err).NotTo(HaveOccurred())
	// The live image names interfaces ethN: the MAC decides.
	itf := find(cfg, "52:54:00:aa:bb:01", "eth0")
	g.Expect(itf).NotTo(BeNil())
	g.Expect(static(itf)).To(BeTrue())
	g.Expect(static(find(cfg, "52:54:00:aa:bb:02", "enp2s0"))).To(BeFalse(), "DHCP")
	g.Expect(find(cfg, "52:54:00:aa:bb:03", "eth1")).To(BeNil())
	g.Expect(cfg.Routes.Config[0].NextHopAddress).To(Equal("192.0.2.1"))
	g.Expect(cfg.DNSResolver.Config.Server).To(Equal([]string{"192.0.2.53"}))

	for doc, msg := range map[string]string{
		"interfaces: [{type: ethernet}]":                                               "interfaces[0]: name or mac-address is required",
		"interfaces: [{name: a, mac-address: nope}]":                                   "interfaces[0].mac-address",
		"interfaces: [{name: a, ipv4: {address: [{ip: 1.2.3, prefix-length: 24}]}}]":   `interfaces[0].ipv4.address[0].ip: "1.2.3" is not an IP address`,
		"interfaces: [{name: a, ipv4: {address: [{ip: 1.2.3.4, prefix-length: 33}]}}]": "interfaces[0].ipv4.address[0].prefix-length: 33 is not in 0..32",
		"routes: {config: [{destination: default}]}":                                   "routes.config[0].destination",
		"dns-resolver: {config: {server: [dns.example.com]}}":                          `dns-resolver.config.server[0]: "dns.example.com" is not an IP address`,
		"interfaces: 3": "not an nmstate document",
		`{"links":[{"id":"eth0"}],"networks":[]}`: "is it an nmstate document?",
	} {
		_, err := deployapi.ParseNetworkConfig([]byte(doc))
		g.Expect(err).To(MatchError(ContainSubstring(msg)), doc)
	}
}
