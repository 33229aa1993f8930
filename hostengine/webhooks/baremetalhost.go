package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-baremetalhost,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=baremetalhosts,verbs=create;update,versions=v1alpha1,name=validation.baremetalhost.metal3.io,admissionReviewVersions=v1

// BareMetalHost validates BareMetalHosts on create and update.
type BareMetalHost struct {
	// Reader lists the hub's BareMetalHosts, in every namespace, when a
	// host's boot MAC is set or changed; SetupWebhookWithManager gives it
	// the manager's (cached) client when nil.
	Reader client.Reader
}

var _ admission.Validator[*metal3v1.BareMetalHost] = &BareMetalHost{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the kubebuilder marker above (config/webhook).
func (w *BareMetalHost) SetupWebhookWithManager(mgr ctrl.Manager) error {
	if w.Reader == nil {
		w.Reader = mgr.GetClient()
	}
	return ctrl.NewWebhookManagedBy(mgr, &metal3v1.BareMetalHost{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a host with any problem of ValidateHost, and one
// whose boot MAC another host of the hub has.
func (w *BareMetalHost) ValidateCreate(ctx context.Context, host *metal3v1.BareMetalHost) (admission.Warnings, error) {
	errs := ValidateHost(host)
	dup, err := w.bootMACTaken(ctx, host)
	if err != nil {
		return nil, err
	}
	return nil, invalid(host, append(errs, dup...))
}

// ValidateUpdate refuses an update that adds a problem, or changes the
// boot MAC to one another host of the hub has. A problem the host already
// had (a host created before this webhook ran) does not block updates, so
// that finalizers and releases still go through.
func (w *BareMetalHost) ValidateUpdate(ctx context.Context, old, host *metal3v1.BareMetalHost) (admission.Warnings, error) {
	errs := newProblems(ValidateHost(host), ValidateHost(old))
	if normalMAC(old.Spec.BootMACAddress) != normalMAC(host.Spec.BootMACAddress) {
		dup, err := w.bootMACTaken(ctx, host)
		if err != nil {
			return nil, err
		}
		errs = append(errs, dup...)
	}
	return nil, invalid(host, errs)
}

// msgBootMACTaken does not say which host has the MAC: it may be another
// tenant's.
const msgBootMACTaken = "another BareMetalHost on this hub has this boot MAC address: each host's must be unique on the hub " +
	"(a host network boots by it)"

// bootMACTaken refuses host's boot MAC when another BareMetalHost, in any
// namespace, has it too (compared as MAC addresses, not as strings). Two
// hosts created at once may both get through, the list being the cache's:
// the host engine then serves the older one.
func (w *BareMetalHost) bootMACTaken(ctx context.Context, host *metal3v1.BareMetalHost) (field.ErrorList, error) {
	mac := normalMAC(host.Spec.BootMACAddress)
	if mac == "" {
		return nil, nil
	}
	hosts := &metal3v1.BareMetalHostList{}
	if err := w.Reader.List(ctx, hosts, client.UnsafeDisableDeepCopy); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("checking that the boot MAC address is unique: %w", err))
	}
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if h.UID != host.UID && (h.Namespace != host.Namespace || h.Name != host.Name) && normalMAC(h.Spec.BootMACAddress) == mac {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "bootMACAddress"), host.Spec.BootMACAddress, msgBootMACTaken)}, nil
		}
	}
	return nil, nil
}

// normalMAC is mac in net.HardwareAddr's form; "" when it is not a MAC.
func normalMAC(mac string) string {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return ""
	}
	return hw.String()
}

// ValidateDelete allows every delete.
func (w *BareMetalHost) ValidateDelete(context.Context, *metal3v1.BareMetalHost) (admission.Warnings, error) {
	return nil, nil
}

func invalid(host *metal3v1.BareMetalHost, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(metal3v1.GroupVersion.WithKind("BareMetalHost").GroupKind(), host.Name, errs)
}

// newProblems is errs without those old has too (same field, type and value).
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

// Values the engine accepts for an image.
var (
	checksumTypes = []string{string(metal3v1.MD5), string(metal3v1.SHA256), string(metal3v1.SHA512), string(metal3v1.AutoChecksum)}
	diskFormats   = []string{"raw", "qcow2", "vdi", "vmdk", "live-iso"}
)

// ValidateHost returns every problem of a host's spec, each naming its field.
func ValidateHost(host *metal3v1.BareMetalHost) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	for _, ref := range []struct {
		name string
		ref  *corev1.SecretReference
	}{{"userData", host.Spec.UserData}, {"networkData", host.Spec.NetworkData}, {"metaData", host.Spec.MetaData}} {
		errs = append(errs, validateSecretNamespace(host, ref.ref, spec.Child(ref.name, "namespace"))...)
	}
	if a := host.Spec.BMC.Address; a != "" {
		errs = append(errs, metal3v1.ValidateBMCAddressField(a, spec.Child("bmc", "address"))...)
	}
	if mac := host.Spec.BootMACAddress; mac != "" {
		errs = append(errs, metal3v1.ValidateMACAddressField(mac, spec.Child("bootMACAddress"))...)
	}
	errs = append(errs, validateClusterReference(host)...)
	if img := host.Spec.Image; img != nil {
		errs = append(errs, validateImage(img, spec.Child("image"))...)
	}
	// image and customDeploy may be set together, as upstream allows: the
	// custom deploy step may write the image itself.
	if cd := host.Spec.CustomDeploy; cd != nil && cd.Method == "" {
		errs = append(errs, field.Required(spec.Child("customDeploy", "method"), "the deploy procedure to run, e.g. start_assisted_install"))
	}
	return errs
}

// validateSecretNamespace refuses a Secret of another namespace: the
// engine reads referenced Secrets with its own rights, so another
// namespace would let whoever writes hosts read any Secret.
func validateSecretNamespace(host *metal3v1.BareMetalHost, ref *corev1.SecretReference, path *field.Path) field.ErrorList {
	if ref == nil || ref.Namespace == "" || ref.Namespace == host.Namespace {
		return nil
	}
	e := field.Forbidden(path, fmt.Sprintf("must be the BareMetalHost's namespace %q (a host may only use Secrets of its own namespace)", host.Namespace))
	e.BadValue = ref.Namespace // not shown for Forbidden; tells updates apart
	return field.ErrorList{e}
}

// ClusterReferenceAnnotation is the agent-based install's annotation (its
// BareMetalHost ⇄ Agent controller's) binding the host's Agent to the
// ClusterDeployment "<namespace>/<name>"; it is checked here, with the
// host, rather than by a second webhook on BareMetalHosts.
const ClusterReferenceAnnotation = "bmac.agent-install.openshift.io/cluster-reference"

// validateClusterReference refuses a cluster-reference annotation naming
// another namespace: a host may only join its own namespace's clusters.
// (Its form is the controller's to report.)
func validateClusterReference(host *metal3v1.BareMetalHost) field.ErrorList {
	ns, _, ok := strings.Cut(host.Annotations[ClusterReferenceAnnotation], "/")
	if !ok || ns == "" || ns == host.Namespace {
		return nil
	}
	e := field.Forbidden(field.NewPath("metadata", "annotations").Key(ClusterReferenceAnnotation),
		fmt.Sprintf("must name a ClusterDeployment of the BareMetalHost's namespace %q (a reference must stay in the object's namespace)", host.Namespace))
	e.BadValue = ns // not shown for Forbidden; tells updates apart
	return field.ErrorList{e}
}

func validateImage(img *metal3v1.Image, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateImageURL(img.URL, path.Child("url"))...)
	if t := string(img.ChecksumType); t != "" && !slices.Contains(checksumTypes, t) {
		errs = append(errs, field.NotSupported(path.Child("checksumType"), t, checksumTypes))
	}
	if f := img.DiskFormat; f != nil && *f != "" && !slices.Contains(diskFormats, *f) {
		errs = append(errs, field.NotSupported(path.Child("format"), *f, diskFormats))
	}
	return errs
}

func validateImageURL(raw string, path *field.Path) field.ErrorList {
	if raw == "" {
		return field.ErrorList{field.Required(path, "the http(s) or file URL the image is downloaded from")}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, raw, "must be an http, https or file URL")}
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Host == "" {
			return field.ErrorList{field.Invalid(path, raw, "must name a host, as in http://images.example.com/rhcos.raw")}
		}
	case u.Scheme == "file":
		if u.Path == "" || u.Path == "/" {
			return field.ErrorList{field.Invalid(path, raw, "must name a file, as in file:///images/rhcos.raw")}
		}
	default:
		return field.ErrorList{field.Invalid(path, raw, fmt.Sprintf("unsupported scheme %q: must be an http, https or file URL", u.Scheme))}
	}
	return nil
}
