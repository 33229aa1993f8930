package webhooks

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
)

// +kubebuilder:webhook:path=/validate-agent-install-openshift-io-v1beta1-infraenv,mutating=false,failurePolicy=fail,sideEffects=None,groups=agent-install.openshift.io,resources=infraenvs,verbs=create;update,versions=v1beta1,name=validation.infraenv.agent-install.openshift.io,admissionReviewVersions=v1

// Upstream's refusals of InfraEnvs.
const (
	msgClusterRefWithOSImageVersion = "Either Spec.ClusterRef or Spec.OSImageVersion should be specified (not both)."
	msgClusterRefImmutable          = "Attempted to change Spec.ClusterRef which is immutable after InfraEnv creation."
	msgCPUArchitectureImmutable     = "Attempted to change Spec.CpuArchitecture which is immutable after InfraEnv creation."
	msgOSImageVersionNotInstalled   = "spec.OSImageVersion is not valid. It can't be added alongside with a clusterRef when the cluster is not installed yet."
)

// defaultCPUArchitecture is what an InfraEnv without cpuArchitecture means.
const defaultCPUArchitecture = "x86_64"

// InfraEnv validates InfraEnvs on create and update.
type InfraEnv struct {
	// Reader reads the ClusterDeployment of an InfraEnv given an
	// osImageVersion; rare enough to read without a cache.
	Reader client.Reader
}

var _ admission.Validator[*agentinstallv1.InfraEnv] = &InfraEnv{}

// SetupWebhookWithManager registers the webhook on mgr's webhook server,
// at the path of the marker above.
func (w *InfraEnv) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &agentinstallv1.InfraEnv{}).WithValidator(w).Complete()
}

// ValidateCreate refuses an InfraEnv naming another namespace (clusterRef,
// mirrorRegistryRef), and one with both a clusterRef and an
// osImageVersion: the cluster's release picks the discovery OS.
func (w *InfraEnv) ValidateCreate(_ context.Context, ie *agentinstallv1.InfraEnv) (admission.Warnings, error) {
	if err := crossNamespace("InfraEnv", ie.Namespace, infraEnvRefs(ie), nil); err != nil {
		return nil, err
	}
	if ie.Spec.ClusterRef != nil && ie.Spec.OSImageVersion != "" {
		return nil, badRequest(msgClusterRefWithOSImageVersion)
	}
	return nil, nil
}

// ValidateUpdate refuses, in upstream's order: a clusterRef set, changed
// or removed (an InfraEnv made without one stays without: its hosts are
// bound one by one through their Agents); a changed cpuArchitecture
// (unset is x86_64); and an osImageVersion added next to a clusterRef
// whose ClusterDeployment is not installed (or cannot be read) — once it
// is, hosts added to it may boot another release's OS. Before those, a
// reference to another namespace that was not there before.
func (w *InfraEnv) ValidateUpdate(ctx context.Context, old, ie *agentinstallv1.InfraEnv) (admission.Warnings, error) {
	if err := crossNamespace("InfraEnv", ie.Namespace, infraEnvRefs(ie), infraEnvRefs(old)); err != nil {
		return nil, err
	}
	if !sameClusterRef(old.Spec.ClusterRef, ie.Spec.ClusterRef) {
		return nil, badRequest(msgClusterRefImmutable)
	}
	if cpuArchitecture(old) != cpuArchitecture(ie) {
		return nil, badRequest(msgCPUArchitectureImmutable)
	}
	if ie.Spec.ClusterRef != nil && old.Spec.OSImageVersion == "" && ie.Spec.OSImageVersion != "" && !w.installed(ctx, ie) {
		return nil, badRequest(msgOSImageVersionNotInstalled)
	}
	return nil, nil
}

// ValidateDelete allows every delete.
func (w *InfraEnv) ValidateDelete(context.Context, *agentinstallv1.InfraEnv) (admission.Warnings, error) {
	return nil, nil
}

// installed tells whether the ClusterDeployment of ie's clusterRef, in
// ie's namespace, is installed; a read that fails says no, as upstream's
// does, and so does a clusterRef to another namespace (not read).
func (w *InfraEnv) installed(ctx context.Context, ie *agentinstallv1.InfraEnv) bool {
	if rec.InfraEnvClusterReference(ie) != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cd := &hivev1.ClusterDeployment{}
	key := client.ObjectKey{Namespace: ie.Namespace, Name: ie.Spec.ClusterRef.Name}
	if err := w.Reader.Get(ctx, key, cd); err != nil {
		ctrl.LoggerFrom(ctx).Info("Refusing an osImageVersion: cannot read the InfraEnv's ClusterDeployment", "clusterDeployment", klog.KRef(key.Namespace, key.Name), "error", err.Error())
		return false
	}
	return cd.Spec.Installed
}

func cpuArchitecture(ie *agentinstallv1.InfraEnv) string {
	if ie.Spec.CpuArchitecture == "" {
		return defaultCPUArchitecture
	}
	return ie.Spec.CpuArchitecture
}

// sameClusterRef: both unset, or both naming the same ClusterDeployment.
func sameClusterRef(a, b *agentinstallv1.ClusterReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
