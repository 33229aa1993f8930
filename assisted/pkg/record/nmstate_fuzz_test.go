package record

import (
	"net"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/metalshift/metalshift/agent/discovery"
	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// FuzzStaticHost checks the NMStateConfig path end to end, as the hub
// accepts it and the discovery image applies it: an NMStateConfig
// staticHost accepts (spec.config, spec.interfaces as "name=mac,..."),
// booted on a machine with one of its MAC addresses, gives that machine a
// configuration whose every interface MAC address is one the
// NMStateConfig wrote (in its document or its interfaces), spelled as the
// kernel spells NICs' addresses, and whose every ethernet interface is
// matched by MAC address; a machine with none of them gets nothing. What
// staticHost refuses gets one of upstream's messages or says which MAC
// address is wrong.
func FuzzStaticHost(f *testing.F) {
	f.Add([]byte("interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  mac-address: 52:54:01:aa:aa:a1\n"+
		"  ipv4: {enabled: true, dhcp: false, address: [{ip: 192.168.122.2, prefix-length: 24}]}\n"+
		"dns-resolver: {config: {server: [192.168.122.1]}}\n"+
		"routes: {config: [{destination: 0.0.0.0/0, next-hop-address: 192.168.122.1, next-hop-interface: eth0}]}\n"),
		"eth0=52:54:01:aa:aa:a1")
	f.Add([]byte("interfaces:\n- name: eth0\n  type: ethernet\n  ipv4: {enabled: true, address: [{ip: 10.0.0.2, prefix-length: 8}]}\n"+
		"- name: bond0\n  type: bond\n  ipv4: {enabled: true, dhcp: true}\n"), "eth0=52-54-00-00-00-0A")
	f.Add([]byte("interfaces: [{name: eth1, type: ethernet}]"), "eth0=52:54:00:00:00:01")
	f.Add([]byte("interfaces: [{name: eth0, type: ethernet}]"), "eth0=52:54:00:00:00:01,eth1=52:54:00:00:00:01")
	f.Add([]byte("interfaces: [{name: eth0, type: ethernet}]"), "eth0=not-a-mac")
	f.Add([]byte("interfaces: [{name: eth0, type: ethernet, mac-address: 52:54:00:00:00:09}]"), "eth0=52:54:00:00:00:01")
	f.Add([]byte("{}"), "eth0=52:54:00:00:00:01")
	f.Add([]byte(""), "")
	f.Fuzz(func(t *testing.T, doc []byte, nics string) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return // the API server keeps spec.config as JSON
		}
		c := &agentinstallv1.NMStateConfig{Spec: agentinstallv1.NMStateConfigSpec{NetConfig: &runtime.RawExtension{Raw: js}}}
		inputMACs := map[string]bool{}
		for _, nic := range strings.Split(nics, ",") {
			name, mac, _ := strings.Cut(nic, "=")
			c.Spec.Interfaces = append(c.Spec.Interfaces, &agentinstallv1.Interface{Name: name, MacAddress: mac})
			if hw, err := net.ParseMAC(mac); err == nil {
				inputMACs[hw.String()] = true
			}
		}
		h, err := staticHost(0, c)
		if err != nil {
			for _, prefix := range []string{"at least one interface for host 0 ", "MACs and Interfaces for host 0 must be unique",
				"failed to validate network yaml for host 0, ", "mac-interface mapping for interface ", "the MAC address "} {
				if strings.HasPrefix(err.Error(), prefix) {
					return
				}
			}
			t.Fatalf("%q with %q is refused with an unknown message: %v", doc, nics, err)
		}
		parsed, err := deployapi.ParseNetworkConfig([]byte(h.NetworkYAML))
		if err != nil {
			t.Fatalf("accepted %q, but its network YAML %q does not parse: %v", doc, h.NetworkYAML, err)
		}
		for _, itf := range parsed.Interfaces {
			if itf.MACAddress != "" {
				inputMACs[itf.MACAddress] = true
			}
		}
		for _, m := range h.MACInterfaceMap {
			cfg, err := discovery.StaticNetwork([]deployapi.StaticNetworkHost{h}, []string{m.MACAddress})
			if err != nil || cfg == nil {
				t.Fatalf("accepted %q with %q, but a machine with %s gets %+v, %v", doc, nics, m.MACAddress, cfg, err)
			}
			for _, itf := range cfg.Interfaces {
				if itf.Type == "ethernet" && itf.MACAddress == "" {
					t.Fatalf("%q with %q: ethernet interface %q is not matched by MAC address", doc, nics, itf.Name)
				}
				if hw, err := net.ParseMAC(itf.MACAddress); itf.MACAddress != "" && (err != nil || hw.String() != itf.MACAddress || !inputMACs[itf.MACAddress]) {
					t.Fatalf("%q with %q: interface %q gets MAC %q, which the NMStateConfig does not have as the kernel spells it", doc, nics, itf.Name, itf.MACAddress)
				}
			}
		}
		const stranger = "02:00:5e:00:53:99"
		if !inputMACs[stranger] {
			if cfg, err := discovery.StaticNetwork([]deployapi.StaticNetworkHost{h}, []string{stranger}); cfg != nil || err != nil {
				t.Fatalf("%q with %q: a machine with none of its MACs gets %+v, %v", doc, nics, cfg, err)
			}
		}
	})
}
