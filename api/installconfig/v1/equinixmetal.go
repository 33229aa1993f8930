package installconfig

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EquinixMetal is the Equinix Metal platform: devices in a project's metro
// (or facility), booting metalshift's live image by custom iPXE, with two
// elastic IPs for the API and the ingress.
type EquinixMetal struct {
	// ProjectID is the project the cluster's devices and addresses are in.
	ProjectID string `json:"projectID"`
	// Metro (or, for projects that still place devices by facility,
	// Facility) is where they are; exactly one is set.
	Metro    string `json:"metro,omitempty"`
	Facility string `json:"facility,omitempty"`
	// APIURL is the API's base URL (Equinix Metal's when empty), e.g. the
	// emulator's.
	APIURL string `json:"apiURL,omitempty"`
	// MetadataURL is the metadata service devices read (Equinix Metal's
	// when empty).
	MetadataURL string `json:"metadataURL,omitempty"`
	// APIKeyFile is a file holding the API key; without it the key is
	// $METAL_AUTH_TOKEN. The key is never written into the install-config
	// the cluster gets, nor into any device.
	APIKeyFile string `json:"apiKeyFile,omitempty"`
	// DefaultMachinePlatform is every pool's machine unless the pool says
	// otherwise.
	DefaultMachinePlatform EquinixMetalMachinePool `json:"defaultMachinePlatform"`
	// APIVIP and IngressVIP are the cluster's elastic IPs. `create
	// manifests` reserves them (tagged with the cluster) and writes them
	// here when they are empty.
	APIVIP     string `json:"apiVIP,omitempty"`
	IngressVIP string `json:"ingressVIP,omitempty"`
	// DNS, when set, is a server taking RFC 2136 updates signed with a TSIG
	// key, where the provider writes api, api-int and *.apps.
	DNS *EquinixMetalDNS `json:"dns,omitempty"`
}

// EquinixMetalMachinePool is the machine of a pool.
type EquinixMetalMachinePool struct {
	// Plan is the device plan, e.g. c3.small.x86.
	Plan string `json:"plan"`
	// HardwareReservationID is one reservation's ID, IDs separated by
	// commas, or next-available.
	HardwareReservationID string `json:"hardwareReservationID,omitempty"`
	// Tags are added to every device.
	Tags []string `json:"tags,omitempty"`
}

// EquinixMetalDNS is where the cluster's records are written.
type EquinixMetalDNS struct {
	// Server is host:port (port 53 when absent).
	Server string `json:"server"`
	// Zone holds baseDomain.
	Zone string `json:"zone"`
	// TSIGKeyFile is a BIND key file (key "<name>" { algorithm ...;
	// secret "..."; };) whose key signs the updates.
	TSIGKeyFile string `json:"tsigKeyFile"`
}

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func (ic *InstallConfig) validateEquinixMetal() field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("platform", "equinixMetal")
	em := ic.Platform.EquinixMetal
	if !uuidPattern.MatchString(em.ProjectID) {
		errs = append(errs, field.Invalid(p.Child("projectID"), em.ProjectID, "must be the project's UUID"))
	}
	switch {
	case em.Metro == "" && em.Facility == "":
		errs = append(errs, field.Required(p.Child("metro"), "one of metro or facility"))
	case em.Metro != "" && em.Facility != "":
		errs = append(errs, field.Forbidden(p.Child("facility"), "metro and facility are exclusive: set one"))
	}
	for _, u := range []struct{ name, value string }{{"apiURL", em.APIURL}, {"metadataURL", em.MetadataURL}} {
		if u.value == "" {
			continue
		}
		if parsed, err := url.Parse(u.value); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || parsed.User != nil {
			errs = append(errs, field.Invalid(p.Child(u.name), "<redacted>", "must be an http or https URL without a user or password"))
		}
	}
	if em.DefaultMachinePlatform.Plan == "" {
		errs = append(errs, field.Required(p.Child("defaultMachinePlatform", "plan"), "the device plan, e.g. c3.small.x86"))
	}
	for _, v := range []struct{ name, value string }{{"apiVIP", em.APIVIP}, {"ingressVIP", em.IngressVIP}} {
		if v.value == "" {
			continue
		}
		if a, err := netip.ParseAddr(v.value); err != nil || !a.Is4() {
			errs = append(errs, field.Invalid(p.Child(v.name), v.value, "must be an IPv4 address (an elastic IP of the project)"))
		}
	}
	if (em.APIVIP == "") != (em.IngressVIP == "") {
		errs = append(errs, field.Invalid(p.Child("ingressVIP"), em.IngressVIP, "apiVIP and ingressVIP are set together, or both left to `create manifests`"))
	}
	if d := em.DNS; d != nil {
		dp := p.Child("dns")
		if d.Server == "" {
			errs = append(errs, field.Required(dp.Child("server"), "host:port of a server taking RFC 2136 updates"))
		}
		zone := strings.TrimSuffix(d.Zone, ".")
		if len(validation.IsDNS1123Subdomain(zone)) > 0 {
			errs = append(errs, field.Invalid(dp.Child("zone"), d.Zone, "must be a DNS name"))
		} else if ic.BaseDomain != zone && !strings.HasSuffix(ic.BaseDomain, "."+zone) {
			errs = append(errs, field.Invalid(dp.Child("zone"), d.Zone, fmt.Sprintf("must hold baseDomain %s", ic.BaseDomain)))
		}
		if d.TSIGKeyFile == "" {
			errs = append(errs, field.Required(dp.Child("tsigKeyFile"), "a BIND key file whose key may update the zone"))
		}
	}
	return errs
}
