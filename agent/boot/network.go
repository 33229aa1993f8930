package boot

import (
	"strings"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// find returns the configuration of the interface with mac and name.
func find(c *deployapi.NetworkConfig, mac, name string) *deployapi.Interface {
	if c == nil {
		return nil
	}
	for i := range c.Interfaces {
		itf := &c.Interfaces[i]
		if itf.MACAddress != "" && strings.EqualFold(itf.MACAddress, mac) {
			return itf
		}
	}
	for i := range c.Interfaces {
		if itf := &c.Interfaces[i]; itf.MACAddress == "" && itf.Name == name {
			return itf
		}
	}
	return nil
}

// static tells whether itf is configured with static addresses only.
func static(itf *deployapi.Interface) bool {
	if itf == nil {
		return false
	}
	dhcp := itf.IPv4 != nil && itf.IPv4.Enabled && itf.IPv4.DHCP
	has := func(ip *deployapi.IP) bool { return ip != nil && ip.Enabled && len(ip.Address) > 0 }
	return (has(itf.IPv4) || has(itf.IPv6)) && !dhcp
}
