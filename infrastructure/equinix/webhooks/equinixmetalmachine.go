package webhooks

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-equinixmetalmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalmachines,verbs=create;update,versions=v1alpha1,name=validation.equinixmetalmachine.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-equinixmetalmachinetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=equinixmetalmachinetemplates,verbs=create;update,versions=v1alpha1,name=validation.equinixmetalmachinetemplate.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1

// EquinixMetalMachine validates EquinixMetalMachines on create and update.
type EquinixMetalMachine struct{}

var _ admission.Validator[*infrav1.EquinixMetalMachine] = &EquinixMetalMachine{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the marker above.
func (w *EquinixMetalMachine) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.EquinixMetalMachine{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a machine with any problem of ValidateMachineSpec.
func (w *EquinixMetalMachine) ValidateCreate(_ context.Context, m *infrav1.EquinixMetalMachine) (admission.Warnings, error) {
	return nil, invalid("EquinixMetalMachine", m.Name, ValidateMachineSpec(&m.Spec, field.NewPath("spec")))
}

// ValidateUpdate refuses a change of the spec but for tags and providerID,
// as Cluster API machines are replaced rather than changed; providerID may
// be set once, by the provider when it creates the device.
func (w *EquinixMetalMachine) ValidateUpdate(_ context.Context, old, m *infrav1.EquinixMetalMachine) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := newProblems(ValidateMachineSpec(&m.Spec, spec), ValidateMachineSpec(&old.Spec, spec))
	if old.Spec.ProviderID != "" && m.Spec.ProviderID != old.Spec.ProviderID {
		errs = append(errs, field.Invalid(spec.Child("providerID"), m.Spec.ProviderID, "cannot change once set"))
	}
	errs = append(errs, machineSpecChanges(&old.Spec, &m.Spec, spec)...)
	return nil, invalid("EquinixMetalMachine", m.Name, errs)
}

// ValidateDelete allows every delete.
func (w *EquinixMetalMachine) ValidateDelete(context.Context, *infrav1.EquinixMetalMachine) (admission.Warnings, error) {
	return nil, nil
}

// machineSpecChanges refuses each field of a machine's spec that changed,
// but providerID and tags.
func machineSpecChanges(old, spec *infrav1.EquinixMetalMachineSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name     string
		old, new string
	}{
		{"plan", old.Plan, spec.Plan},
		{"metro", old.Metro, spec.Metro},
		{"facility", old.Facility, spec.Facility},
		{"operatingSystem", old.OperatingSystem, spec.OperatingSystem},
		{"ipxeScriptURL", old.IPXEScriptURL, spec.IPXEScriptURL},
		{"billingCycle", old.BillingCycle, spec.BillingCycle},
		{"hardwareReservationID", old.HardwareReservationID, spec.HardwareReservationID},
	} {
		if f.old != f.new {
			value := f.new
			if f.name == "ipxeScriptURL" {
				value = "<redacted>" // may carry a token in its query
			}
			errs = append(errs, immutable(path.Child(f.name), value))
		}
	}
	if !slices.Equal(old.SSHKeys, spec.SSHKeys) {
		errs = append(errs, field.Forbidden(path.Child("sshKeys"), apimachineryvalidation.FieldImmutableErrorMsg))
	}
	// A field added to the spec later is immutable too until this
	// function says otherwise.
	a, b := *old, *spec
	for _, s := range []*infrav1.EquinixMetalMachineSpec{&a, &b} {
		s.ProviderID, s.Tags = "", nil
	}
	if len(errs) == 0 && !equality.Semantic.DeepEqual(a, b) {
		errs = append(errs, field.Forbidden(path, "is immutable but for providerID and tags"))
	}
	return errs
}

// ValidateMachineSpec returns every problem of a machine's spec, each
// naming its field: metro and facility exclusive, the iPXE script's URL
// (custom_ipxe only), the OS image the live image writes (required unless
// the machine boots its own script) and the hardware reservations.
func ValidateMachineSpec(spec *infrav1.EquinixMetalMachineSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Metro != "" && spec.Facility != "" {
		errs = append(errs, field.Forbidden(path.Child("facility"), "metro and facility are exclusive: set one"))
	}
	if spec.IPXEScriptURL != "" {
		errs = append(errs, validateURL(spec.IPXEScriptURL, path.Child("ipxeScriptURL"))...)
		if os := spec.OperatingSystem; os != "" && os != infrav1.CustomIPXE {
			errs = append(errs, field.Invalid(path.Child("operatingSystem"), os, "must be custom_ipxe with an ipxeScriptURL"))
		}
	}
	if os := spec.OperatingSystem; (os == "" || os == infrav1.CustomIPXE) && spec.IPXEScriptURL == "" && spec.Image == nil {
		errs = append(errs, field.Required(path.Child("image"), "metalshift's live image writes this OS image to the device: set it, or name an ipxeScriptURL of your own"))
	}
	if spec.Image != nil {
		errs = append(errs, validateURL(spec.Image.URL, path.Child("image", "url"))...)
	}
	return append(errs, ValidateHardwareReservationID(spec.HardwareReservationID, path.Child("hardwareReservationID"))...)
}

// EquinixMetalMachineTemplate validates EquinixMetalMachineTemplates on
// create and update.
type EquinixMetalMachineTemplate struct{}

var _ admission.Validator[*infrav1.EquinixMetalMachineTemplate] = &EquinixMetalMachineTemplate{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the marker above.
func (w *EquinixMetalMachineTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.EquinixMetalMachineTemplate{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a template whose machine spec has a problem of
// ValidateMachineSpec.
func (w *EquinixMetalMachineTemplate) ValidateCreate(_ context.Context, t *infrav1.EquinixMetalMachineTemplate) (admission.Warnings, error) {
	return nil, invalid("EquinixMetalMachineTemplate", t.Name, ValidateMachineSpec(&t.Spec.Template.Spec, field.NewPath("spec", "template", "spec")))
}

// ValidateUpdate refuses any change of the spec: the machines made from a
// template are its copies, and Cluster API rolls machines out by pointing
// at a new template, never by changing one.
func (w *EquinixMetalMachineTemplate) ValidateUpdate(_ context.Context, old, t *infrav1.EquinixMetalMachineTemplate) (admission.Warnings, error) {
	var errs field.ErrorList
	tmpl := field.NewPath("spec", "template")
	if !equality.Semantic.DeepEqual(old.Spec.Template.Spec, t.Spec.Template.Spec) {
		errs = append(errs, field.Forbidden(tmpl.Child("spec"), "a template's spec is immutable: create a new template and point its users at it"))
	}
	if !equality.Semantic.DeepEqual(old.Spec.Template.ObjectMeta, t.Spec.Template.ObjectMeta) {
		errs = append(errs, field.Forbidden(tmpl.Child("metadata"), "a template's spec is immutable: create a new template and point its users at it"))
	}
	return nil, invalid("EquinixMetalMachineTemplate", t.Name, errs)
}

// ValidateDelete allows every delete.
func (w *EquinixMetalMachineTemplate) ValidateDelete(context.Context, *infrav1.EquinixMetalMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}
