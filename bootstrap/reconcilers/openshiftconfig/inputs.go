package openshiftconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/bootstrap/pkg/ignition"
)

// inputs are what the control plane tells the bootstrap provider: the
// install-config, the install state and the user manifests.
type inputs struct {
	cp            *controlplanev1.OpenShiftControlPlane
	installConfig []byte
	ic            *installconfig.InstallConfig
}

// controlPlaneInputs reads the cluster's OpenShiftControlPlane and its
// install-config. It returns nil without error when the cluster's control
// plane is not an OpenShiftControlPlane.
func (r *Reconciler) controlPlaneInputs(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, cluster *clusterv1.Cluster) (*inputs, error) {
	ref := cluster.Spec.ControlPlaneRef
	if ref.Kind != "OpenShiftControlPlane" || ref.APIGroup != controlplanev1.GroupVersion.Group {
		return nil, nil
	}
	in := &inputs{cp: &controlplanev1.OpenShiftControlPlane{}}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, in.cp); err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForControlPlaneReason,
			fmt.Sprintf("Waiting for OpenShiftControlPlane %s: %v", ref.Name, err))
		return nil, errWait
	}
	name := in.cp.Spec.InstallConfigRef.Name
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, s); err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForInstallConfigReason,
			fmt.Sprintf("Cannot read the install-config Secret %s named by OpenShiftControlPlane %s: %v", name, in.cp.Name, err))
		return nil, errWait
	}
	in.installConfig = s.Data[controlplanev1.InstallConfigKey]
	ic, err := installconfig.Parse(in.installConfig)
	if err == nil {
		if errs := ic.Validate(); len(errs) > 0 {
			err = errs.ToAggregate()
		}
	}
	if err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.InvalidInstallConfigReason,
			fmt.Sprintf("Secret %s key %s: %v", name, controlplanev1.InstallConfigKey, err))
		return nil, errInvalidSpec
	}
	in.ic = ic
	return in, nil
}

// bootstrapData renders the bootstrap node's config.
func (r *Reconciler) bootstrapData(ctx context.Context, cfg *bootstrapv1.OpenShiftConfig, in *inputs) ([]byte, error) {
	state := &corev1.Secret{}
	name := in.cp.Spec.InstallStateRef.Name
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: name}, state); err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.WaitingForInstallStateReason,
			fmt.Sprintf("Cannot read the install-state Secret %s: %v", name, err))
		return nil, errWait
	}
	manifests, err := r.manifests(ctx, cfg.Namespace, in.cp)
	if err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.InvalidManifestsReason, err.Error())
		return nil, errInvalidSpec
	}
	// The bootstrap node gets the pull secret as a file of its own, and an
	// install-config without it and without BMC credentials.
	sanitized, err := installconfig.Sanitize(in.installConfig)
	if err != nil {
		setCondition(cfg, metav1.ConditionFalse, bootstrapv1.InvalidInstallConfigReason, err.Error())
		return nil, errInvalidSpec
	}
	data, err := ignition.Bootstrap(ignition.BootstrapOptions{
		InstallConfig:   sanitized,
		PullSecret:      []byte(in.ic.PullSecret),
		Manifests:       manifests,
		RootCACert:      state.Data[controlplanev1.InstallStateCACertKey],
		RootCAKey:       state.Data[controlplanev1.InstallStateCAKeyKey],
		AdminKubeconfig: state.Data[controlplanev1.InstallStateKubeconfigKey],
		ReleaseVersion:  in.cp.Spec.DistributionVersion,
		Override:        []byte(cfg.Spec.IgnitionOverride),
	})
	if err != nil {
		reason := bootstrapv1.InvalidInstallStateReason
		msg := fmt.Sprintf("install-state Secret %s: %v", name, err)
		if errors.Is(err, ignition.ErrInvalidOverride) {
			reason, msg = bootstrapv1.InvalidIgnitionOverrideReason, "spec.ignitionOverride: "+err.Error()
		}
		setCondition(cfg, metav1.ConditionFalse, reason, msg)
		return nil, errInvalidSpec
	}
	return data, nil
}

// manifests reads the Secrets the control plane selects; each key of a
// Secret is a file of the directory its annotation names.
func (r *Reconciler) manifests(ctx context.Context, namespace string, cp *controlplanev1.OpenShiftControlPlane) ([]ignition.Manifest, error) {
	sel, err := metav1.LabelSelectorAsSelector(&cp.Spec.ManifestsSelector)
	if err != nil {
		return nil, fmt.Errorf("OpenShiftControlPlane %s spec.manifestsSelector: %w", cp.Name, err)
	}
	if sel.Empty() {
		return nil, nil
	}
	list := &corev1.SecretList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	var out []ignition.Manifest
	for _, s := range list.Items {
		var dir string
		switch t := s.Annotations[controlplanev1.ManifestAnnotation]; t {
		case controlplanev1.ManifestTypeManifest:
			dir = "manifests"
		case controlplanev1.ManifestTypeOpenShift:
			dir = "openshift"
		default:
			return nil, fmt.Errorf("secret %s is selected as a manifest but its annotation %s is %q, not %s or %s",
				s.Name, controlplanev1.ManifestAnnotation, t, controlplanev1.ManifestTypeManifest, controlplanev1.ManifestTypeOpenShift)
		}
		for k, v := range s.Data {
			out = append(out, ignition.Manifest{Dir: dir, Name: k, Data: v})
		}
	}
	return out, nil
}
