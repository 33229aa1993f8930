package webhooks

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/provisioning"
)

// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-provisioning,mutating=false,failurePolicy=ignore,sideEffects=None,groups=metal3.io,resources=provisionings,verbs=create;update,versions=v1alpha1,name=vprovisioning.kb.io,admissionReviewVersions=v1

// Provisioning validates Provisionings on create and update, as upstream's
// vprovisioning.kb.io does (failurePolicy Ignore: while the webhook is
// down, the reconciler's own check reports an invalid spec). The platform
// rule needs the Infrastructure "cluster"; without one the other rules are
// still checked. On a platform where the operator does nothing, upstream
// serves no webhook: everything is admitted.
type Provisioning struct {
	// Reader reads the Infrastructure, from the API.
	Reader client.Reader
}

var _ admission.Validator[*metal3v1.Provisioning] = &Provisioning{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the kubebuilder marker above (config/webhook).
func (w *Provisioning) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &metal3v1.Provisioning{}).WithValidator(w).Complete()
}

// ValidateCreate refuses a Provisioning with another name than the
// singleton's, or an invalid spec.
func (w *Provisioning) ValidateCreate(ctx context.Context, p *metal3v1.Provisioning) (admission.Warnings, error) {
	if p.Name != metal3v1.ProvisioningSingletonName {
		return nil, errors.New(provisioning.SingletonNameError)
	}
	return nil, w.validate(ctx, p)
}

// ValidateUpdate refuses an invalid spec (upstream has no immutable
// field). An update that leaves the spec as it was is always allowed: a
// spec that became invalid (the platform changed, or it was written while
// the webhook was down) must not keep the operator from its finalizer.
func (w *Provisioning) ValidateUpdate(ctx context.Context, old, p *metal3v1.Provisioning) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return nil, w.validate(ctx, p)
}

// ValidateDelete allows every delete.
func (w *Provisioning) ValidateDelete(context.Context, *metal3v1.Provisioning) (admission.Warnings, error) {
	return nil, nil
}

// The platform rule reads the Infrastructure "cluster".
// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get

func (w *Provisioning) validate(ctx context.Context, p *metal3v1.Provisioning) error {
	infra := &configv1.Infrastructure{}
	err := w.Reader.Get(ctx, client.ObjectKey{Name: configv1.InfrastructureName}, infra)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return provisioning.Validate(&p.Spec, provisioning.AllowedModes(configv1.BareMetalPlatformType))
	case err != nil:
		return fmt.Errorf("reading the Infrastructure %q: %w", configv1.InfrastructureName, err)
	}
	platform := infra.Status.Type()
	if !provisioning.Enabled(platform) {
		return nil
	}
	return provisioning.Validate(&p.Spec, provisioning.AllowedModes(platform))
}
