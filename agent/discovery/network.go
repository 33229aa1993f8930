package discovery

import (
	"fmt"
	"strings"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// StaticNetwork returns the network configuration of the InfraEnv's
// static network host (an NMStateConfig) whose MAC addresses include one
// of macs, the machine's NICs', as the live image applies it: the nmstate
// document with each interface named in the MAC map matched by its MAC
// address. It returns nil when no host matches.
func StaticNetwork(hosts []deployapi.StaticNetworkHost, macs []string) (*deployapi.NetworkConfig, error) {
	for i, h := range hosts {
		if !anyMAC(h.MACInterfaceMap, macs) {
			continue
		}
		cfg, err := deployapi.ParseNetworkConfig([]byte(h.NetworkYAML))
		if err != nil {
			return nil, fmt.Errorf("staticNetwork[%d]: %w", i, err)
		}
		for j := range cfg.Interfaces {
			itf := &cfg.Interfaces[j]
			if itf.MACAddress != "" {
				continue
			}
			for _, m := range h.MACInterfaceMap {
				if m.LogicalNICName == itf.Name {
					itf.MACAddress = m.MACAddress
				}
			}
		}
		return cfg, nil
	}
	return nil, nil
}

func anyMAC(m []deployapi.MACInterface, macs []string) bool {
	for _, e := range m {
		for _, mac := range macs {
			if strings.EqualFold(e.MACAddress, mac) {
				return true
			}
		}
	}
	return false
}
