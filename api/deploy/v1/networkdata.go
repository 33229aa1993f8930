package deployapi

import (
	"fmt"
	"net"
	"strings"

	"sigs.k8s.io/yaml"
)

// NetworkConfig is the part of an nmstate document (the format of a
// BareMetalHost's preprovisioningNetworkDataName Secret, key nmstate, and
// of BootConfig.NetworkData) the live image applies: static IPv4 and IPv6 addresses of ethernet
// interfaces, routes and DNS servers. The live image has no udev, so its
// interfaces are named ethN: an interface is matched by mac-address, or by
// name when it has none.
type NetworkConfig struct {
	Interfaces []Interface `json:"interfaces,omitempty"`
	Routes     struct {
		Config []Route `json:"config,omitempty"`
	} `json:"routes,omitempty"`
	DNSResolver struct {
		Config struct {
			Server []string `json:"server,omitempty"`
		} `json:"config,omitempty"`
	} `json:"dns-resolver,omitempty"`
}

// Interface is an nmstate interface.
type Interface struct {
	Name       string `json:"name"`
	Type       string `json:"type,omitempty"`
	State      string `json:"state,omitempty"`
	MACAddress string `json:"mac-address,omitempty"`
	IPv4       *IP    `json:"ipv4,omitempty"`
	IPv6       *IP    `json:"ipv6,omitempty"`
}

// IP is an interface's nmstate ipv4 or ipv6 section.
type IP struct {
	Enabled bool `json:"enabled"`
	DHCP    bool `json:"dhcp,omitempty"`
	// Autoconf is IPv6 only.
	Autoconf bool `json:"autoconf,omitempty"`
	Address  []struct {
		IP           string `json:"ip"`
		PrefixLength int    `json:"prefix-length"`
	} `json:"address,omitempty"`
}

// Route is an nmstate route.
type Route struct {
	Destination      string `json:"destination"`
	NextHopAddress   string `json:"next-hop-address,omitempty"`
	NextHopInterface string `json:"next-hop-interface,omitempty"`
}

// ParseNetworkConfig reads an nmstate document and checks what the live
// image needs of it; the messages name the field. MAC addresses are
// returned as the kernel writes them (lower case, colons).
func ParseNetworkConfig(data []byte) (*NetworkConfig, error) {
	cfg := &NetworkConfig{}
	if err := yaml.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("network data is not an nmstate document: %w", err)
	}
	if len(cfg.Interfaces) == 0 && len(cfg.Routes.Config) == 0 && len(cfg.DNSResolver.Config.Server) == 0 {
		return nil, fmt.Errorf("network data has no interfaces, routes.config or dns-resolver.config.server: is it an nmstate document?")
	}
	for i := range cfg.Interfaces {
		itf := &cfg.Interfaces[i]
		if itf.Name == "" && itf.MACAddress == "" {
			return nil, fmt.Errorf("interfaces[%d]: name or mac-address is required", i)
		}
		if itf.MACAddress != "" {
			hw, err := net.ParseMAC(itf.MACAddress)
			if err != nil {
				return nil, fmt.Errorf("interfaces[%d].mac-address: %w", i, err)
			}
			// As the kernel spells a NIC's address (52:54:00:aa:bb:01),
			// which the live image compares it with.
			itf.MACAddress = hw.String()
		}
		// In a fixed order, so that a document with two errors always
		// gets the same message.
		for _, f := range []struct {
			name string
			ip   *IP
			bits int
		}{{"ipv4", itf.IPv4, 32}, {"ipv6", itf.IPv6, 128}} {
			if f.ip == nil {
				continue
			}
			for j, a := range f.ip.Address {
				ip := net.ParseIP(a.IP)
				if ip == nil {
					return nil, fmt.Errorf("interfaces[%d].%s.address[%d].ip: %q is not an IP address", i, f.name, j, a.IP)
				}
				// The live image sizes the mask by the address (32 bits
				// when it has an IPv4 form): the section must agree, or
				// the prefix length would not fit. IPv4-mapped IPv6
				// addresses are neither.
				is4 := ip.To4() != nil && !strings.Contains(a.IP, ":")
				is6 := ip.To4() == nil
				if f.bits == 32 && !is4 {
					return nil, fmt.Errorf("interfaces[%d].%s.address[%d].ip: %q is not an IPv4 address", i, f.name, j, a.IP)
				}
				if f.bits == 128 && !is6 {
					return nil, fmt.Errorf("interfaces[%d].%s.address[%d].ip: %q is not an IPv6 address", i, f.name, j, a.IP)
				}
				if a.PrefixLength < 0 || a.PrefixLength > f.bits {
					return nil, fmt.Errorf("interfaces[%d].%s.address[%d].prefix-length: %d is not in 0..%d", i, f.name, j, a.PrefixLength, f.bits)
				}
			}
		}
	}
	for i, r := range cfg.Routes.Config {
		if _, _, err := net.ParseCIDR(r.Destination); err != nil {
			return nil, fmt.Errorf("routes.config[%d].destination: %w", i, err)
		}
		if r.NextHopAddress != "" && net.ParseIP(r.NextHopAddress) == nil {
			return nil, fmt.Errorf("routes.config[%d].next-hop-address: %q is not an IP address", i, r.NextHopAddress)
		}
	}
	for i, s := range cfg.DNSResolver.Config.Server {
		if net.ParseIP(s) == nil {
			return nil, fmt.Errorf("dns-resolver.config.server[%d]: %q is not an IP address", i, s)
		}
	}
	return cfg, nil
}
