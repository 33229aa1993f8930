package webhooks

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

// SetupWithManager registers every webhook of the package on mgr's webhook
// server, at the paths of the kubebuilder markers (config/webhook).
func SetupWithManager(mgr ctrl.Manager) error {
	for _, setup := range []func(ctrl.Manager) error{
		(&EquinixMetalCluster{}).SetupWebhookWithManager,
		(&EquinixMetalMachine{}).SetupWebhookWithManager,
		(&EquinixMetalMachineTemplate{}).SetupWebhookWithManager,
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// invalid is errs as the API server's 422 Invalid for kind's object name;
// nil without errors.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: kind}, name, errs)
}

// immutable is the refusal of a change to the field at path.
func immutable(path *field.Path, value any) *field.Error {
	return field.Invalid(path, value, apimachineryvalidation.FieldImmutableErrorMsg)
}

// uuidPattern is an ID of the Equinix Metal API in its canonical form.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidateHardwareReservationID checks a machine's hardwareReservationID:
// empty, next-available, one reservation ID, or IDs separated by commas
// (spaces around them allowed), each once.
func ValidateHardwareReservationID(value string, path *field.Path) field.ErrorList {
	if value == "" || value == infrav1.NextAvailableHardwareReservation {
		return nil
	}
	seen := map[string]bool{}
	for _, id := range strings.Split(value, ",") {
		id = strings.TrimSpace(id)
		switch {
		case id == infrav1.NextAvailableHardwareReservation:
			return field.ErrorList{field.Invalid(path, value, "next-available stands alone, not in a list of reservation IDs")}
		case id == "":
			return field.ErrorList{field.Invalid(path, value, "has an empty entry: want a reservation ID, IDs separated by commas, or next-available")}
		case !uuidPattern.MatchString(id):
			return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("%q is not a hardware reservation ID (a UUID): want a reservation ID, IDs separated by commas, or next-available", id))}
		case seen[strings.ToLower(id)]:
			return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("names reservation %s twice", id))}
		}
		seen[strings.ToLower(id)] = true
	}
	return nil
}

// validateURL checks an http(s) URL the provider calls or hands a device: it
// must name a host and carry no user name or password (the API key is a
// Secret's, never a field's). The bad value is not echoed: it may hold a
// password.
func validateURL(value string, path *field.Path) field.ErrorList {
	if value == "" {
		return nil
	}
	u, err := url.Parse(value)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, "<redacted>", "is not a URL")}
	case u.User != nil:
		return field.ErrorList{field.Invalid(path, "<redacted>", "must not carry a user name or password")}
	case u.Scheme != "http" && u.Scheme != "https":
		return field.ErrorList{field.Invalid(path, value, "must be an http or https URL")}
	case u.Hostname() == "":
		return field.ErrorList{field.Invalid(path, value, "must name a host")}
	}
	return nil
}

// validateSecretName checks that name can name a Secret.
func validateSecretName(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// validateDNSServer checks a DNS server's address: a host name or IP
// address, with an optional port.
func validateDNSServer(server string, path *field.Path) field.ErrorList {
	host, port := server, ""
	if h, p, err := net.SplitHostPort(server); err == nil {
		host, port = h, p
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return field.ErrorList{field.Invalid(path, server, "has an invalid port")}
		}
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if len(validation.IsDNS1123Subdomain(strings.TrimSuffix(host, "."))) > 0 {
		return field.ErrorList{field.Invalid(path, server, "must be a host name or IP address, with an optional :port")}
	}
	return nil
}

// validationZone returns the problems of a DNS zone's name (a trailing dot
// allowed).
func validationZone(zone string) []string {
	return validation.IsDNS1123Subdomain(strings.TrimSuffix(zone, "."))
}

// newProblems is errs without those old has too (same field, type and
// value): an update is refused only for what it breaks.
func newProblems(errs, old field.ErrorList) field.ErrorList {
	key := func(e *field.Error) string { return fmt.Sprintf("%s\x00%s\x00%v", e.Type, e.Field, e.BadValue) }
	had := map[string]bool{}
	for _, e := range old {
		had[key(e)] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had[key(e)] {
			out = append(out, e)
		}
	}
	return out
}
