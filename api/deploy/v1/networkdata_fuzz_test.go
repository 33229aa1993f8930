package deployapi

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// nmstateSeeds are nmstate documents as users write them (NMStateConfig
// spec.config, a host's network data) and the edge cases the parser must
// refuse or read one way only.
var nmstateSeeds = []string{
	// A static host, as in the NMStateConfig docs.
	`interfaces:
- name: eth0
  type: ethernet
  state: up
  mac-address: 52:54:01:aa:aa:a1
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: 192.168.122.2
      prefix-length: 24
dns-resolver:
  config:
    server: [192.168.122.1]
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 192.168.122.1
    next-hop-interface: eth0
    table-id: 254
`,
	// Dual stack, matched by name, with a second NIC on DHCP.
	`interfaces:
- name: enp1s0
  type: ethernet
  ipv4: {enabled: true, address: [{ip: 10.0.0.5, prefix-length: 16}]}
  ipv6: {enabled: true, autoconf: false, address: [{ip: "fd00::5", prefix-length: 64}]}
- name: enp2s0
  ipv4: {enabled: true, dhcp: true}
routes: {config: [{destination: "::/0", next-hop-address: "fd00::1"}]}
`,
	`{"interfaces":[{"name":"eth0","mac-address":"52-54-00-12-34-56","ipv4":{"enabled":true,"address":[{"ip":"192.0.2.1","prefix-length":32}]}}]}`,
	`dns-resolver: {config: {server: ["2001:db8::53"]}}`,
	// Edge cases.
	`interfaces: [{name: a, ipv6: {enabled: true, address: [{ip: 10.0.0.1, prefix-length: 64}]}}]`,
	`interfaces: [{name: a, ipv6: {enabled: true, address: [{ip: "::ffff:10.0.0.1", prefix-length: 120}]}}]`,
	`interfaces: [{name: a, ipv4: {enabled: true, address: [{ip: "::1", prefix-length: 24}]}}]`,
	`interfaces: [{name: a, ipv4: {address: [{ip: x}]}, ipv6: {address: [{ip: y}]}}]`,
	`interfaces: [{name: a, ipv4: {address: [{ip: 1.2.3.4, prefix-length: -1}]}}]`,
	`interfaces: [{name: a, mac-address: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"}]`,
	`interfaces: [{mac-address: 52:54:00:12:34:56}]`,
	`interfaces: [{type: ethernet}]`,
	`routes: {config: [{destination: default}]}`,
	`interfaces: 3`,
	`{"links":[{"id":"eth0"}],"networks":[]}`,
	"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\ninterfaces: [*c]\n",
	"",
	"---\n---\n",
}

// FuzzParseNetworkConfig checks what the live image relies on when it
// applies a document ParseNetworkConfig accepted: every address is of its
// section's family, so the mask the live image computes for it (sized by
// the address) has the document's prefix length; every MAC address is
// spelled as the kernel spells a NIC's, which the live image compares it
// with; the document reads back the same after it is written out again
// (no field is read two ways). A refused document gets an error naming
// where, the same one every time.
func FuzzParseNetworkConfig(f *testing.F) {
	for _, s := range nmstateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseNetworkConfig(data)
		if _, again := ParseNetworkConfig(data); (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("%q parses two ways: %v, then %v", data, err, again)
		}
		if err != nil {
			msg := err.Error()
			for _, prefix := range []string{"network data ", "interfaces[", "routes.config[", "dns-resolver.config.server["} {
				if strings.HasPrefix(msg, prefix) {
					return
				}
			}
			t.Fatalf("%q is refused without saying where: %v", data, err)
		}
		if len(cfg.Interfaces)+len(cfg.Routes.Config)+len(cfg.DNSResolver.Config.Server) == 0 {
			t.Fatalf("%q is accepted with nothing to apply", data)
		}
		for i, itf := range cfg.Interfaces {
			if itf.Name == "" && itf.MACAddress == "" {
				t.Fatalf("interfaces[%d] of %q has neither name nor MAC", i, data)
			}
			if hw, err := net.ParseMAC(itf.MACAddress); itf.MACAddress != "" && (err != nil || hw.String() != itf.MACAddress) {
				t.Fatalf("interfaces[%d] of %q has MAC %q, not as the kernel writes NICs' addresses (%v)", i, data, itf.MACAddress, err)
			}
			for _, ip := range []*IP{itf.IPv4, itf.IPv6} {
				if ip == nil {
					continue
				}
				for _, a := range ip.Address {
					if ones, bits := liveImageMask(a.IP, a.PrefixLength).Size(); bits == 0 || ones != a.PrefixLength || (ip == itf.IPv4) != (bits == 32) {
						t.Fatalf("interfaces[%d] of %q: the live image would give %s/%d the mask /%d of %d bits", i, data, a.IP, a.PrefixLength, ones, bits)
					}
				}
			}
		}
		for _, r := range cfg.Routes.Config {
			if _, _, err := net.ParseCIDR(r.Destination); err != nil {
				t.Fatalf("route destination %q of %q: %v", r.Destination, data, err)
			}
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("writing %+v: %v", cfg, err)
		}
		back, err := ParseNetworkConfig(out)
		if err != nil {
			t.Fatalf("%q is accepted, but written out as %q it is not: %v", data, out, err)
		}
		if a, b := mustJSON(t, cfg), mustJSON(t, back); !bytes.Equal(a, b) {
			t.Fatalf("%q reads as %s, written out and read again as %s", data, a, b)
		}
	})
}

// liveImageMask is the mask the live image (agent/boot) gives an address:
// 32 bits when the address has an IPv4 form, else 128.
func liveImageMask(ip string, prefix int) net.IPMask {
	bits := 128
	if net.ParseIP(ip).To4() != nil {
		bits = 32
	}
	return net.CIDRMask(prefix, bits)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
