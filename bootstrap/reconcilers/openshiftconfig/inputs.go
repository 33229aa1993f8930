package openshiftconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	"github.com/metalshift/metalshift/internal/ignition"
)

// bootstrapData renders the bootstrap node's config from the inputs the
// control plane wrote into spec.bootstrap: it reads the Secrets they name
// and parses none of them.
func (r *Reconciler) bootstrapData(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig) ([]byte, error) {
	in := cfg.Spec.Bootstrap
	if in == nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.BootstrapNeedsControlPlaneReason,
			"spec.bootstrap is empty: a bootstrap node's config is rendered from the install-config, install state and manifests "+
				"that the OpenShiftControlPlane creating the bootstrap Machine writes there")
		return nil, errInvalidSpec
	}
	ic, err := r.secret(ctx, cfg.Namespace, in.InstallConfigRef.Name, bootstrapv1.InstallConfigKey, bootstrapv1.PullSecretKey)
	if err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForInstallConfigReason,
			fmt.Sprintf("Cannot read the install-config Secret %s (spec.bootstrap.installConfigRef): %v", in.InstallConfigRef.Name, err))
		return nil, errWait
	}
	state, err := r.secret(ctx, cfg.Namespace, in.InstallStateRef.Name,
		bootstrapv1.InstallStateCACertKey, bootstrapv1.InstallStateCAKeyKey, bootstrapv1.InstallStateKubeconfigKey)
	if err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForInstallStateReason,
			fmt.Sprintf("Cannot read the install-state Secret %s (spec.bootstrap.installStateRef): %v", in.InstallStateRef.Name, err))
		return nil, errWait
	}
	manifests, err := r.manifests(ctx, cfg, &in.ManifestsSelector)
	if err != nil {
		return nil, err
	}
	data, err := ignition.Bootstrap(ignition.BootstrapOptions{
		InstallConfig:   ic.Data[bootstrapv1.InstallConfigKey],
		PullSecret:      ic.Data[bootstrapv1.PullSecretKey],
		Manifests:       manifests,
		RootCACert:      state.Data[bootstrapv1.InstallStateCACertKey],
		RootCAKey:       state.Data[bootstrapv1.InstallStateCAKeyKey],
		AdminKubeconfig: state.Data[bootstrapv1.InstallStateKubeconfigKey],
		ReleaseVersion:  in.ReleaseVersion,
		Override:        []byte(cfg.Spec.IgnitionOverride),
	})
	if err != nil {
		reason := bootstrapv1.InvalidInstallStateReason
		msg := fmt.Sprintf("install-state Secret %s: %v", in.InstallStateRef.Name, err)
		switch {
		case errors.Is(err, ignition.ErrInvalidOverride):
			reason, msg = bootstrapv1.InvalidIgnitionOverrideReason, "spec.ignitionOverride: "+err.Error()
		case errors.Is(err, ignition.ErrInstallConfigHasSecrets):
			reason = bootstrapv1.InvalidInstallConfigReason
			msg = fmt.Sprintf("install-config Secret %s (spec.bootstrap.installConfigRef): %v; nothing was rendered", in.InstallConfigRef.Name, err)
		}
		setCondition(cfg, metav1.ConditionFalse, reason, msg)
		if reason == bootstrapv1.InvalidIgnitionOverrideReason {
			return nil, errInvalidSpec // a spec change wakes us
		}
		return nil, errWait // the Secrets are not watched: look again
	}
	return data, nil
}

// secret reads a Secret directly (Cluster API's manager keeps unlabelled
// Secrets out of the cache) and checks that it has the keys.
func (r *Reconciler) secret(ctx context.Context, namespace, name string, keys ...string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if len(s.Data[k]) == 0 {
			return nil, fmt.Errorf("key %s is missing or empty", k)
		}
	}
	return s, nil
}

// manifests reads the Secrets sel selects; each key of a Secret is a file
// of the directory its annotation names. A problem with a selected Secret
// is a condition, looked at again later (Secrets are not watched).
func (r *Reconciler) manifests(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, sel *metav1.LabelSelector) ([]ignition.Manifest, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.InvalidManifestsReason, "spec.bootstrap.manifestsSelector: "+err.Error())
		return nil, errInvalidSpec
	}
	if selector.Empty() {
		return nil, nil
	}
	list := &corev1.SecretList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(cfg.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing the manifest Secrets: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var out []ignition.Manifest
	for _, s := range list.Items {
		var dir string
		switch t := s.Annotations[bootstrapv1.ManifestAnnotation]; t {
		case bootstrapv1.ManifestTypeManifest:
			dir = "manifests"
		case bootstrapv1.ManifestTypeOpenShift:
			dir = "openshift"
		default:
			setCondition(cfg, metav1.ConditionFalse, bootstrapv1.InvalidManifestsReason, fmt.Sprintf(
				"Secret %s is selected as a manifest (spec.bootstrap.manifestsSelector) but its annotation %s is %q, not %s or %s",
				s.Name, bootstrapv1.ManifestAnnotation, t, bootstrapv1.ManifestTypeManifest, bootstrapv1.ManifestTypeOpenShift))
			return nil, errWait
		}
		for k, v := range s.Data {
			out = append(out, ignition.Manifest{Dir: dir, Name: k, Data: v})
		}
	}
	return out, nil
}
