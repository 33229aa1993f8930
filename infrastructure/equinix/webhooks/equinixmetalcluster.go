package webhooks

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-equinixmetalcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalclusters,verbs=create;update,versions=v1alpha1,name=validation.equinixmetalcluster.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1

// EquinixMetalCluster validates EquinixMetalClusters on create and update.
type EquinixMetalCluster struct{}

var _ admission.Validator[*infrav1.EquinixMetalCluster] = &EquinixMetalCluster{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the marker above.
func (w *EquinixMetalCluster) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.EquinixMetalCluster{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a cluster with any problem of ValidateClusterSpec.
func (w *EquinixMetalCluster) ValidateCreate(_ context.Context, c *infrav1.EquinixMetalCluster) (admission.Warnings, error) {
	return nil, invalid("EquinixMetalCluster", c.Name, ValidateClusterSpec(&c.Spec, field.NewPath("spec")))
}

// ValidateUpdate refuses a change of the project, the credentials Secret,
// the metro or the facility (the devices and elastic IPs are where they
// were made, with the key that made them: a new key goes into the same
// Secret), and a change of the control-plane endpoint once it has a host
// (the cluster's certificates and kubeconfigs name it). A problem the
// cluster already had does not block updates, so that finalizers still go.
func (w *EquinixMetalCluster) ValidateUpdate(_ context.Context, old, c *infrav1.EquinixMetalCluster) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := newProblems(ValidateClusterSpec(&c.Spec, spec), ValidateClusterSpec(&old.Spec, spec))
	if c.Spec.ProjectID != old.Spec.ProjectID {
		errs = append(errs, immutable(spec.Child("projectID"), c.Spec.ProjectID))
	}
	if c.Spec.CredentialsRef != old.Spec.CredentialsRef {
		errs = append(errs, immutable(spec.Child("credentialsRef", "name"), c.Spec.CredentialsRef.Name))
	}
	if c.Spec.Metro != old.Spec.Metro {
		errs = append(errs, immutable(spec.Child("metro"), c.Spec.Metro))
	}
	if c.Spec.Facility != old.Spec.Facility {
		errs = append(errs, immutable(spec.Child("facility"), c.Spec.Facility))
	}
	if !old.Spec.ControlPlaneEndpoint.IsZero() && c.Spec.ControlPlaneEndpoint != old.Spec.ControlPlaneEndpoint {
		errs = append(errs, field.Invalid(spec.Child("controlPlaneEndpoint"), c.Spec.ControlPlaneEndpoint,
			"cannot change once set: the cluster's certificates and kubeconfigs name it"))
	}
	return nil, invalid("EquinixMetalCluster", c.Name, errs)
}

// ValidateDelete allows every delete.
func (w *EquinixMetalCluster) ValidateDelete(context.Context, *infrav1.EquinixMetalCluster) (admission.Warnings, error) {
	return nil, nil
}

// ValidateClusterSpec returns every problem of a cluster's spec, each
// naming its field: metro or facility (exactly one), the Secrets' names,
// the API URL and the DNS server.
func ValidateClusterSpec(spec *infrav1.EquinixMetalClusterSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case spec.Metro == "" && spec.Facility == "":
		errs = append(errs, field.Required(path.Child("metro"), "one of metro or facility is required"))
	case spec.Metro != "" && spec.Facility != "":
		errs = append(errs, field.Forbidden(path.Child("facility"), "metro and facility are exclusive: set one"))
	}
	errs = append(errs, validateSecretName(spec.CredentialsRef.Name, path.Child("credentialsRef", "name"))...)
	errs = append(errs, validateURL(spec.APIURL, path.Child("apiURL"))...)
	errs = append(errs, validateURL(spec.MetadataURL, path.Child("metadataURL"))...)
	if dns := spec.DNS; dns != nil {
		p := path.Child("dns")
		errs = append(errs, validateDNSServer(dns.Server, p.Child("server"))...)
		if len(validationZone(dns.Zone)) > 0 {
			errs = append(errs, field.Invalid(p.Child("zone"), dns.Zone, "must be a DNS name, e.g. example.com"))
		}
		if b := dns.BaseDomain; b != "" {
			base, zone := strings.TrimSuffix(b, "."), strings.TrimSuffix(dns.Zone, ".")
			switch {
			case len(validationZone(b)) > 0:
				errs = append(errs, field.Invalid(p.Child("baseDomain"), b, "must be a DNS name, e.g. clusters.example.com"))
			case base != zone && !strings.HasSuffix(base, "."+zone):
				errs = append(errs, field.Invalid(p.Child("baseDomain"), b, "must be the zone "+dns.Zone+" or a domain within it"))
			}
		}
		errs = append(errs, validateSecretName(dns.TSIGKeyRef.Name, p.Child("tsigKeyRef", "name"))...)
	}
	return errs
}
