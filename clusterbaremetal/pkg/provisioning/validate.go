package provisioning

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// SingletonNameError is the message refusing a Provisioning not named
// provisioning-configuration.
var SingletonNameError = fmt.Sprintf("Provisioning object is a singleton and must be named %q", metal3v1.ProvisioningSingletonName)

// Validate returns every problem of spec on a platform allowing modes, in
// upstream's order and words (each message names its field), aggregated
// into one error; nil when the spec is valid.
func Validate(spec *metal3v1.ProvisioningSpec, modes Modes) error {
	mode := spec.NetworkMode()
	if !modes[mode] {
		return utilerrors.NewAggregate([]error{fmt.Errorf("ProvisioningNetwork %s is not supported", mode)})
	}
	errs := validateOSDownloadURL(spec.ProvisioningOSDownloadURL)
	if mode == metal3v1.ProvisioningNetworkDisabled && spec.ProvisioningIP == "" && spec.ProvisioningNetworkCIDR == "" {
		return utilerrors.NewAggregate(errs)
	}
	if spec.ProvisioningNetworkGateway != "" && mode != metal3v1.ProvisioningNetworkManaged {
		errs = append(errs, fmt.Errorf("provisioningNetworkGateway %q is only supported for Managed provisioningNetwork, not %s", spec.ProvisioningNetworkGateway, mode))
	}
	errs = append(errs, validateNetwork(spec, mode)...)
	if mode == metal3v1.ProvisioningNetworkManaged && spec.ProvisioningDHCPRange == "" {
		errs = append(errs, fmt.Errorf("provisioningDHCPRange is required in Managed mode but is not set"))
	}
	return utilerrors.NewAggregate(errs)
}

// validateOSDownloadURL checks the OS image URL, when one is given: an
// http(s) URL of a compressed qcow2 image with its sha256.
func validateOSDownloadURL(raw string) []error {
	if raw == "" {
		return nil
	}
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return []error{fmt.Errorf("the provisioningOSDownloadURL provided: %q is invalid", raw)}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return []error{fmt.Errorf("unsupported scheme %q in provisioningOSDownloadURL %s", u.Scheme, raw)}
	}
	var errs []error
	sum := u.Query().Get("sha256")
	if sum == "" {
		errs = append(errs, fmt.Errorf("the sha256 parameter in the provisioningOSDownloadURL %q is missing", raw))
	}
	if len(sum) != 64 {
		errs = append(errs, fmt.Errorf("the sha256 parameter in the provisioningOSDownloadURL %q is invalid", raw))
	}
	if !strings.HasSuffix(u.Path, ".qcow2.gz") && !strings.HasSuffix(u.Path, ".qcow2.xz") {
		errs = append(errs, fmt.Errorf("the provisioningOSDownloadURL provided: %q is an OS image and must end in .qcow2.gz or .qcow2.xz", raw))
	}
	return errs
}

// validateNetwork checks the provisioning address, and in the modes with a
// provisioning network its CIDR, and in Managed mode the gateway and the
// DHCP range as well (other modes ignore them).
func validateNetwork(spec *metal3v1.ProvisioningSpec, mode metal3v1.ProvisioningNetwork) []error {
	ip := net.ParseIP(spec.ProvisioningIP)
	if ip == nil {
		return []error{fmt.Errorf("could not parse provisioningIP %q", spec.ProvisioningIP)}
	}
	if mode == metal3v1.ProvisioningNetworkDisabled {
		return nil
	}
	_, cidr, err := net.ParseCIDR(spec.ProvisioningNetworkCIDR)
	if err != nil {
		return []error{fmt.Errorf("could not parse provisioningNetworkCIDR %q", spec.ProvisioningNetworkCIDR)}
	}
	var errs []error
	if ones, bits := cidr.Mask.Size(); bits == 8*net.IPv6len && ones < 64 && mode == metal3v1.ProvisioningNetworkManaged {
		errs = append(errs, fmt.Errorf("provisioningNetworkCIDR mask must be greater than or equal to 64 for managed IPv6 networks"))
	}
	if !cidr.Contains(ip) {
		errs = append(errs, fmt.Errorf("provisioningIP %q is not in the range defined by the provisioningNetworkCIDR %q", spec.ProvisioningIP, spec.ProvisioningNetworkCIDR))
	}
	if mode != metal3v1.ProvisioningNetworkManaged {
		return errs
	}
	gateway, gwErrs := validateGateway(spec.ProvisioningNetworkGateway, ip, cidr, spec)
	errs = append(errs, gwErrs...)
	if gateway == nil && spec.ProvisioningNetworkGateway != "" {
		return errs // unparsable: the range is not checked against it
	}
	return append(errs, validateDHCPRange(spec, ip, gateway, cidr)...)
}

// validateGateway checks the gateway, when one is given; it returns it
// parsed (nil when absent or unparsable).
func validateGateway(raw string, ip net.IP, cidr *net.IPNet, spec *metal3v1.ProvisioningSpec) (net.IP, []error) {
	if raw == "" {
		return nil, nil
	}
	gw := net.ParseIP(raw)
	if gw == nil {
		return nil, []error{fmt.Errorf("could not parse provisioningNetworkGateway %q", raw)}
	}
	var errs []error
	if !cidr.Contains(gw) {
		errs = append(errs, fmt.Errorf("provisioningNetworkGateway %q is not in the range defined by the provisioningNetworkCIDR %q", raw, spec.ProvisioningNetworkCIDR))
	}
	if gw.Equal(ip) {
		errs = append(errs, fmt.Errorf("provisioningNetworkGateway %q cannot be the same as provisioningIP %q", raw, spec.ProvisioningIP))
	}
	if networkOrBroadcast(gw, cidr) {
		errs = append(errs, fmt.Errorf("provisioningNetworkGateway %q is not a usable host address (network or broadcast address)", raw))
	}
	return gw, errs
}

// networkOrBroadcast tells whether ip is cidr's network address, or its
// IPv4 broadcast address; on IPv4 /31 and /32 every address is a host's.
func networkOrBroadcast(ip net.IP, cidr *net.IPNet) bool {
	ones, bits := cidr.Mask.Size()
	if bits == 8*net.IPv4len && ones >= 31 {
		return false
	}
	network := cidr.IP.Mask(cidr.Mask)
	if ip.Equal(network) {
		return true
	}
	if bits != 8*net.IPv4len {
		return false
	}
	broadcast := make(net.IP, len(network))
	for i := range network {
		broadcast[i] = network[i] | ^cidr.Mask[i]
	}
	return ip.Equal(broadcast)
}

// validateDHCPRange checks "start,end" (a space after the comma allowed):
// two addresses in the CIDR, the provisioning address and the gateway
// outside them.
func validateDHCPRange(spec *metal3v1.ProvisioningSpec, ip, gateway net.IP, cidr *net.IPNet) []error {
	if spec.ProvisioningDHCPRange == "" {
		return nil
	}
	dhcpRange := strings.ReplaceAll(spec.ProvisioningDHCPRange, ", ", ",")
	parts := strings.Split(dhcpRange, ",")
	if len(parts) != 2 {
		return []error{fmt.Errorf("%q is not a valid provisioningDHCPRange.  DHCP range format: start_ip,end_ip", dhcpRange)}
	}
	var errs []error
	bounds := make([]net.IP, 2)
	for i, part := range parts {
		if bounds[i] = net.ParseIP(part); bounds[i] == nil {
			return append(errs, fmt.Errorf("could not parse provisioningDHCPRange, %q is not a valid IP", part))
		}
		if !cidr.Contains(bounds[i]) {
			errs = append(errs, fmt.Errorf("invalid provisioningDHCPRange, IP %q is not part of the provisioningNetworkCIDR %q", bounds[i], spec.ProvisioningNetworkCIDR))
		}
	}
	within := func(a net.IP) bool { return bytes.Compare(a, bounds[0]) >= 0 && bytes.Compare(a, bounds[1]) <= 0 }
	if within(ip) {
		errs = append(errs, fmt.Errorf("invalid provisioningIP %q, value must be outside of the provisioningDHCPRange %q", ip, dhcpRange))
	}
	if gateway != nil && within(gateway) {
		errs = append(errs, fmt.Errorf("invalid provisioningNetworkGateway %q, value must be outside of the provisioningDHCPRange %q", spec.ProvisioningNetworkGateway, dhcpRange))
	}
	return errs
}
