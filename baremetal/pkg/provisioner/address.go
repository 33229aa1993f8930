package provisioner

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Driver names.
const (
	DriverRedfish = "redfish"
	DriverIPMI    = "ipmi"
)

// Address is a parsed BMC address.
type Address struct {
	// Driver is DriverRedfish or DriverIPMI.
	Driver string
	// Endpoint is http(s)://host:port for Redfish, host:port for IPMI.
	Endpoint string
	// SystemPath is the Redfish system, e.g. /redfish/v1/Systems/1; empty
	// means the only system of the BMC.
	SystemPath string
	// VirtualMedia boots the deploy image from virtual media instead of PXE.
	VirtualMedia bool
}

// ParseAddress parses a BareMetalHost BMC address. The error says what a
// valid address looks like.
func ParseAddress(address string) (Address, error) {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return Address{}, fmt.Errorf("BMC address %q is not a URL like redfish://host/redfish/v1/Systems/1 or ipmi://host:623", address)
	}
	var a Address
	scheme, transport, _ := strings.Cut(u.Scheme, "+")
	switch scheme {
	case "ipmi":
		if transport != "" {
			return Address{}, fmt.Errorf("BMC address %q: ipmi takes no transport", address)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "623")
		}
		return Address{Driver: DriverIPMI, Endpoint: host}, nil
	case "redfish", "redfish-virtualmedia", "idrac-virtualmedia", "ilo5-virtualmedia":
		a = Address{Driver: DriverRedfish, VirtualMedia: strings.HasSuffix(scheme, "virtualmedia")}
	default:
		return Address{}, fmt.Errorf("BMC address %q: unsupported scheme %q; use redfish, redfish+http, redfish+https, redfish-virtualmedia or ipmi", address, u.Scheme)
	}
	switch transport {
	case "", "https":
		a.Endpoint = "https://" + u.Host
	case "http":
		a.Endpoint = "http://" + u.Host
	default:
		return Address{}, fmt.Errorf("BMC address %q: unsupported transport %q; use http or https", address, transport)
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/redfish/v1" {
		a.SystemPath = p
	}
	return a, nil
}
