package openshiftcontrolplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
)

// bootstrapInstallConfigSuffix names the Secret with the install-config a
// bootstrap node receives: <cluster>-bootstrap-install-config.
const bootstrapInstallConfigSuffix = "-bootstrap-install-config"

// installConfig reads and validates the install-config Secret, once per
// reconcile. A problem is a condition (before the control plane is
// initialized) and a Warning event, and the reconcile waits: the Secret is
// not watched.
func (r *Reconciler) installConfig(ctx context.Context, s *scope) (*installconfig.InstallConfig, []byte, error) {
	if s.ic != nil {
		return s.ic, s.icRaw, nil
	}
	name := s.cp.Spec.InstallConfigRef.Name
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cp.Namespace, Name: name}, sec)
	var ic *installconfig.InstallConfig
	if err == nil {
		if ic, err = installconfig.Parse(sec.Data[controlplanev1.InstallConfigKey]); err == nil {
			if errs := ic.Validate(); len(errs) > 0 {
				err = errs.ToAggregate()
			}
		}
	}
	if err != nil {
		msg := fmt.Sprintf("Install-config Secret %s key %s (spec.installConfigRef): %v", name, controlplanev1.InstallConfigKey, err)
		if !ptr.Deref(s.cp.Status.Initialization.ControlPlaneInitialized, false) {
			setCondition(s.cp, controlplanev1.BootstrapReadyCondition, metav1.ConditionFalse, controlplanev1.InvalidInstallConfigReason, msg)
		}
		if c := conditions.Get(s.cp, controlplanev1.MachinesCreatedCondition); c == nil || c.Reason != controlplanev1.InvalidInstallConfigReason || c.Message != msg {
			r.event(s.cp, corev1.EventTypeWarning, controlplanev1.InvalidInstallConfigReason, "%s", msg)
		}
		setCondition(s.cp, controlplanev1.MachinesCreatedCondition, metav1.ConditionFalse, controlplanev1.InvalidInstallConfigReason, msg)
		return nil, nil, errWait
	}
	s.ic, s.icRaw = ic, sec.Data[controlplanev1.InstallConfigKey]
	return s.ic, s.icRaw, nil
}

// configSpec is what the OpenShiftConfig of a Machine with role needs:
// the control plane pushes it, the bootstrap provider renders it.
func (r *Reconciler) configSpec(ctx context.Context, s *scope, role string) (bootstrapv1.OpenShiftConfigSpec, error) {
	ic, raw, err := r.installConfig(ctx, s)
	if err != nil {
		return bootstrapv1.OpenShiftConfigSpec{}, err
	}
	spec := bootstrapv1.OpenShiftConfigSpec{Role: role, MachineConfigServerHost: ic.APIInternalHost()}
	if role != bootstrapv1.RoleBootstrap {
		return spec, nil
	}
	sec, err := r.writeBootstrapInstallConfig(ctx, s, ic, raw)
	if err != nil {
		return spec, err
	}
	spec.Bootstrap = &bootstrapv1.BootstrapInputs{
		InstallConfigRef:  bootstrapv1.SecretReference{Name: sec.Name},
		InstallStateRef:   bootstrapv1.SecretReference{Name: s.cp.Spec.InstallStateRef.Name},
		ManifestsSelector: *s.cp.Spec.ManifestsSelector.DeepCopy(),
		ReleaseVersion:    s.cp.Spec.DistributionVersion,
	}
	return spec, nil
}

// writeBootstrapInstallConfig writes the install-config the bootstrap node
// receives, without pull secret and BMC credentials (parsed and written
// again, never edited as text), and the pull secret beside it. The control
// plane owns the Secret.
func (r *Reconciler) writeBootstrapInstallConfig(ctx context.Context, s *scope, ic *installconfig.InstallConfig, raw []byte) (*corev1.Secret, error) {
	sanitized, err := installconfig.Sanitize(raw)
	if err != nil {
		return nil, fmt.Errorf("install-config Secret %s: %w", s.cp.Spec.InstallConfigRef.Name, err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.cp.Namespace, Name: s.cluster.Name + bootstrapInstallConfigSuffix}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, sec, func() error {
		if sec.Labels == nil {
			sec.Labels = map[string]string{}
		}
		sec.Labels[clusterv1.ClusterNameLabel] = s.cluster.Name
		sec.Type = corev1.SecretTypeOpaque
		sec.Data = map[string][]byte{bootstrapv1.InstallConfigKey: sanitized, bootstrapv1.PullSecretKey: []byte(ic.PullSecret)}
		return controllerutil.SetControllerReference(s.cp, sec, r.Client.Scheme())
	}); err != nil {
		return nil, fmt.Errorf("writing Secret %s: %w", sec.Name, err)
	}
	return sec, nil
}
