package agentclusterinstall

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	rec "github.com/metalshift/metalshift/assisted/pkg/record"
)

// Finalizer keeps an AgentClusterInstall until its Agents are released.
const Finalizer = "agentclusterinstall.agent-install.openshift.io/ai-deprovision"

// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=infraenvs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// reconcileDelete tears a deleted install down: each Agent bound to its
// ClusterDeployment is deleted when its InfraEnv was made for that
// ClusterDeployment (spec.clusterRef names it), else unbound (late
// binding: the Agent goes back to its InfraEnv's pool); the install-state
// Secret it made is deleted (it is owned by the install, so Kubernetes'
// garbage collector would too); then the finalizer goes. The
// ClusterDeployment and the installed cluster are left alone. Each step
// is idempotent: a teardown cut short runs again from the start.
func (r *Reconciler) reconcileDelete(ctx context.Context, aci *hiveextv1.AgentClusterInstall) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(aci, Finalizer) {
		return ctrl.Result{}, nil
	}
	cd := &hivev1.ClusterDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: aci.Namespace, Name: aci.Spec.ClusterDeploymentRef.Name}}
	agents, err := rec.Agents(ctx, r.Client, cd)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range agents {
		if err := r.releaseAgent(ctx, aci, cd, &agents[i]); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.deleteInstallState(ctx, aci); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, rec.RemoveFinalizer(ctx, r.Client, aci, Finalizer)
}

// releaseAgent deletes or unbinds one Agent of a deleted install.
func (r *Reconciler) releaseAgent(ctx context.Context, aci *hiveextv1.AgentClusterInstall, cd *hivev1.ClusterDeployment, a *agentinstallv1.Agent) error {
	if !a.DeletionTimestamp.IsZero() {
		return nil
	}
	ie, err := r.infraEnvOf(ctx, a)
	if err != nil {
		return err
	}
	if ie != nil && ie.Spec.ClusterRef != nil && ie.Spec.ClusterRef.Namespace == cd.Namespace && ie.Spec.ClusterRef.Name == cd.Name {
		if err := r.Client.Delete(ctx, a); err != nil {
			return client.IgnoreNotFound(err)
		}
		r.Recorder.Eventf(aci, corev1.EventTypeNormal, "AgentDeleted",
			"Deleted Agent %s: its InfraEnv %s is the ClusterDeployment's", a.Name, ie.Name)
		return nil
	}
	before := a.DeepCopy()
	a.Spec.ClusterDeploymentName = nil
	err = r.Client.Patch(ctx, a, client.MergeFrom(before))
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		// Refused (a day-1 host mid-install stays bound): the install is
		// going anyway, so the Agent is left bound to nothing.
		r.Recorder.Eventf(aci, corev1.EventTypeWarning, "AgentUnbindFailed", "Could not unbind Agent %s: %v", a.Name, err)
		return nil
	case err != nil:
		return err
	}
	r.Recorder.Eventf(aci, corev1.EventTypeNormal, "AgentUnbound",
		"Unbound Agent %s: it was bound late, it stays in its InfraEnv", a.Name)
	return nil
}

// infraEnvOf is the InfraEnv an Agent registered through (its label, set
// at registration); nil when that is gone.
func (r *Reconciler) infraEnvOf(ctx context.Context, a *agentinstallv1.Agent) (*agentinstallv1.InfraEnv, error) {
	name := a.Labels[agentinstallv1.InfraEnvNameLabel]
	if name == "" {
		return nil, nil
	}
	ie := &agentinstallv1.InfraEnv{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: name}, ie); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ie, nil
}

// deleteInstallState deletes the install-state Secret the install made.
func (r *Reconciler) deleteInstallState(ctx context.Context, aci *hiveextv1.AgentClusterInstall) error {
	s, err := rec.InstallState(ctx, r.Client, aci)
	if err != nil || s == nil || !metav1.IsControlledBy(s, aci) {
		return err
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, s))
}
