package deployapi

import (
	"fmt"
	"net"

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
// image needs of it; the messages name the field.
func ParseNetworkConfig(data []byte) (*NetworkConfig, error) {
	cfg := &NetworkConfig{}
	if err := yaml.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("network data is not an nmstate document: %w", err)
	}
	if len(cfg.Interfaces) == 0 && len(cfg.Routes.Config) == 0 && len(cfg.DNSResolver.Config.Server) == 0 {
		return nil, fmt.Errorf("network data has no interfaces, routes.config or dns-resolver.config.server: is it an nmstate document?")
	}
	for i, itf := range cfg.Interfaces {
		if itf.Name == "" && itf.MACAddress == "" {
			return nil, fmt.Errorf("interfaces[%d]: name or mac-address is required", i)
		}
		if itf.MACAddress != "" {
			if _, err := net.ParseMAC(itf.MACAddress); err != nil {
				return nil, fmt.Errorf("interfaces[%d].mac-address: %w", i, err)
			}
		}
		for fam, ip := range map[string]*IP{"ipv4": itf.IPv4, "ipv6": itf.IPv6} {
			if ip == nil {
				continue
			}
			for j, a := range ip.Address {
				if net.ParseIP(a.IP) == nil {
					return nil, fmt.Errorf("interfaces[%d].%s.address[%d].ip: %q is not an IP address", i, fam, j, a.IP)
				}
				if max := map[string]int{"ipv4": 32, "ipv6": 128}[fam]; a.PrefixLength < 0 || a.PrefixLength > max {
					return nil, fmt.Errorf("interfaces[%d].%s.address[%d].prefix-length: %d is not in 0..%d", i, fam, j, a.PrefixLength, max)
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
