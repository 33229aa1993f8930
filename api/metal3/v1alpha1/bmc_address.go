package v1alpha1

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// BMC drivers a BMC address selects.
const (
	BMCDriverRedfish = "redfish"
	BMCDriverIPMI    = "ipmi"
)

// bmcScheme is what the scheme of a BMC address (before an optional
// "+http" or "+https" transport) selects.
// +kubebuilder:object:generate=false
type bmcScheme struct {
	driver string
	// virtualMedia boots the deploy image from virtual media, not PXE.
	virtualMedia bool
	// transports says whether <scheme>+http and <scheme>+https exist.
	transports bool
}

// bmcSchemes are the schemes the host engine has a driver for: the one
// definition the engine, the installer and the admission webhook share.
var bmcSchemes = map[string]bmcScheme{
	"ipmi":                 {driver: BMCDriverIPMI},
	"redfish":              {driver: BMCDriverRedfish, transports: true},
	"redfish-virtualmedia": {driver: BMCDriverRedfish, virtualMedia: true, transports: true},
	"idrac-virtualmedia":   {driver: BMCDriverRedfish, virtualMedia: true, transports: true},
	"ilo5-virtualmedia":    {driver: BMCDriverRedfish, virtualMedia: true, transports: true},
}

// defaultIPMIPort is where IPMI over LAN listens.
const defaultIPMIPort = "623"

// BMCSchemes lists every URL scheme a BMC address may have, transports
// included (redfish, redfish+http, redfish+https, ...), sorted.
func BMCSchemes() []string {
	var out []string
	for s, d := range bmcSchemes {
		out = append(out, s)
		if d.transports {
			out = append(out, s+"+http", s+"+https")
		}
	}
	sort.Strings(out)
	return out
}

// supportedBMCSchemes is the sentence that lists the schemes in errors.
func supportedBMCSchemes() string {
	var base []string
	for s := range bmcSchemes {
		base = append(base, s)
	}
	sort.Strings(base)
	return strings.Join(base, ", ") + " (all but ipmi also as <scheme>+http or <scheme>+https)"
}

// BMCAddress is a parsed BMC address.
// +kubebuilder:object:generate=false
type BMCAddress struct {
	// Driver is BMCDriverRedfish or BMCDriverIPMI.
	Driver string
	// Endpoint is http(s)://host[:port] for Redfish, host:port for IPMI.
	Endpoint string
	// SystemPath is the Redfish system, e.g. /redfish/v1/Systems/1; empty
	// means the only system of the BMC.
	SystemPath string
	// VirtualMedia boots the deploy image from virtual media instead of PXE.
	VirtualMedia bool
}

// BMCAddressError says why a BMC address is refused.
// +kubebuilder:object:generate=false
type BMCAddressError struct {
	// Address is the address refused, any password in it replaced.
	Address string
	// Reason is why, as a phrase without the address (for field errors,
	// which show the value themselves).
	Reason string
}

func (e *BMCAddressError) Error() string {
	return fmt.Sprintf("BMC address %q: %s", e.Address, e.Reason)
}

// ParseBMCAddress parses a BMC address as the host engine's drivers
// understand it. Errors are *BMCAddressError and say what a valid address
// looks like.
func ParseBMCAddress(address string) (BMCAddress, error) {
	fail := func(format string, args ...any) (BMCAddress, error) {
		return BMCAddress{}, &BMCAddressError{Address: RedactBMCAddress(address), Reason: fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return fail("is not a URL like redfish://host/redfish/v1/Systems/1 or ipmi://host:623")
	}
	if strings.Contains(address, "@") && !userinfoOnly(address) {
		return fail(`has an "@" in its path, query or fragment, which a BMC address never needs (a password with "/", "?" or "#" in the address?)`)
	}
	name, transport, _ := strings.Cut(u.Scheme, "+")
	scheme, ok := bmcSchemes[name]
	if !ok {
		return fail("unsupported scheme %q; supported schemes are %s", u.Scheme, supportedBMCSchemes())
	}
	if scheme.driver == BMCDriverIPMI {
		if transport != "" {
			return fail("unsupported scheme %q: ipmi takes no transport", u.Scheme)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), defaultIPMIPort)
		}
		return BMCAddress{Driver: BMCDriverIPMI, Endpoint: host}, nil
	}
	a := BMCAddress{Driver: scheme.driver, VirtualMedia: scheme.virtualMedia}
	switch transport {
	case "", "https":
		a.Endpoint = "https://" + u.Host
	case "http":
		a.Endpoint = "http://" + u.Host
	default:
		return fail("unsupported transport %q in scheme %q; use http or https", transport, u.Scheme)
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/redfish/v1" {
		a.SystemPath = p
	}
	return a, nil
}

// ValidateBMCAddress accepts the addresses ParseBMCAddress parses and that
// carry no credentials: the address is not secret (it is in the host's
// spec and in install-config copies that leave the hub); the username and
// password belong in the credentials Secret. Errors are *BMCAddressError.
func ValidateBMCAddress(address string) error {
	if _, err := ParseBMCAddress(address); err != nil {
		return err
	}
	if u, _ := url.Parse(address); u.User != nil {
		return &BMCAddressError{Address: RedactBMCAddress(address), Reason: "must not carry a username or password; " +
			"they belong in the credentials Secret (bmc.credentialsName of a BareMetalHost, bmc.username and bmc.password of an install-config host)"}
	}
	return nil
}

// ValidateBMCAddressField is ValidateBMCAddress as field errors at path,
// whose value never shows a password.
func ValidateBMCAddressField(address string, path *field.Path) field.ErrorList {
	err := ValidateBMCAddress(address)
	var e *BMCAddressError
	if errors.As(err, &e) {
		return field.ErrorList{field.Invalid(path, e.Address, e.Reason)}
	}
	if err != nil {
		return field.ErrorList{field.Invalid(path, RedactBMCAddress(address), err.Error())}
	}
	return nil
}

// BMCAddressWithoutUserinfo is address without a username or password,
// for copies of an address that leave the hub (see RedactBMCAddress).
func BMCAddressWithoutUserinfo(address string) string {
	return withUserinfo(address, nil)
}

// RedactBMCAddress is address as a message may show it: webhook errors,
// Events, logs and status print BMC addresses through it and nothing else.
// The address is parsed as a URL and a username or password replaced by
// "redacted". When the parser cannot tell where a userinfo would end (an
// "@" in what it reads as the path, query or fragment, or an address that
// does not parse, as when a password holds "/", "?" or "#"), everything
// between the scheme and the last "@" goes: a password, however it was
// meant, ends at an "@".
func RedactBMCAddress(address string) string {
	return withUserinfo(address, url.User("redacted"))
}

// withUserinfo is address with its userinfo, if any, replaced by user (nil
// drops it).
func withUserinfo(address string, user *url.Userinfo) string {
	if !strings.Contains(address, "@") {
		return address // no reading of it has a userinfo
	}
	if userinfoOnly(address) {
		u, _ := url.Parse(address) // userinfoOnly parsed it
		u.User = user
		return u.String()
	}
	rest := address[strings.LastIndex(address, "@")+1:]
	if user != nil {
		rest = user.String() + "@" + rest
	}
	if scheme, _, ok := strings.Cut(address, "://"); ok && validScheme(scheme) {
		return scheme + "://" + rest
	}
	return rest
}

// userinfoOnly says whether every "@" of address is in the userinfo a
// URL parser reads.
func userinfoOnly(address string) bool {
	u, err := url.Parse(address)
	return err == nil && u.User != nil && u.Opaque == "" && !strings.Contains(u.Host+u.Path+u.RawPath+u.RawQuery+u.Fragment, "@")
}

// validScheme says whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func validScheme(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		other := r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'
		if !letter && (i == 0 || !other) {
			return false
		}
	}
	return s != ""
}

// ValidateMACAddressField accepts a boot MAC address: an EUI-48 address in
// any form net.ParseMAC reads (52:54:00:12:34:56, 52-54-00-12-34-56,
// 5254.0012.3456); bootMACAddress of a BareMetalHost also wants colons.
func ValidateMACAddressField(mac string, path *field.Path) field.ErrorList {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return field.ErrorList{field.Invalid(path, mac, "must be a MAC address such as 52:54:00:12:34:56")}
	}
	return nil
}
