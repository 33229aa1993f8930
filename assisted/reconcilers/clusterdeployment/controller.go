package clusterdeployment

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// Finalizer keeps a ClusterDeployment until its AgentClusterInstall is gone.
const Finalizer = "clusterdeployments.agent-install.openshift.io/ai-deprovision"

// Reconciler keeps the finalizer of ClusterDeployments installed by an
// AgentClusterInstall and tears their install down on deletion.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
	// Writes are the manager's reconcilers' last writes the cache has not
	// seen yet: a reconcile of an object older than one waits for the
	// cache (reconciler.Writes); nil reconciles from the cache as read.
	Writes *reconciler.Writes
}

// +kubebuilder:rbac:groups=hive.openshift.io,resources=clusterdeployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=extensions.hive.openshift.io,resources=agentclusterinstalls,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&hivev1.ClusterDeployment{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&hiveextv1.AgentClusterInstall{}, handler.EnqueueRequestsFromMapFunc(cdOfACI)).
		WithOptions(opts).
		Named("clusterdeployment").
		Complete(r)
}

// cdOfACI wakes the ClusterDeployment of an AgentClusterInstall, which may
// be waiting for it to go.
func cdOfACI(_ context.Context, o client.Object) []ctrl.Request {
	aci := o.(*hiveextv1.AgentClusterInstall)
	if aci.Spec.ClusterDeploymentRef.Name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: aci.Namespace, Name: aci.Spec.ClusterDeploymentRef.Name}}}
}

// installRef is the name of the AgentClusterInstall a ClusterDeployment
// is installed by; "" when it names none (other kinds are not ours).
func installRef(cd *hivev1.ClusterDeployment) string {
	ref := cd.Spec.ClusterInstallRef
	if ref == nil || ref.Kind != "AgentClusterInstall" || ref.Group != hiveextv1.GroupVersion.Group {
		return ""
	}
	return ref.Name
}

// Reconcile adds the finalizer, or tears the install down.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	cd := &hivev1.ClusterDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, cd); err != nil || !shard.Owns(r.WatchFilterValue, cd) {
		if apierrors.IsNotFound(err) {
			r.Writes.Forget(cd, req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Writes.Behind(cd) {
		return ctrl.Result{RequeueAfter: reconciler.CacheBehindRequeue}, nil
	}
	if cd.DeletionTimestamp.IsZero() && installRef(cd) == "" {
		return ctrl.Result{}, nil
	}
	// The finalizer is this reconciler's only write to the
	// ClusterDeployment: End patches it alone.
	run, err := reconciler.Start(r.Client, cd)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cd.DeletionTimestamp.IsZero() {
		controllerutil.AddFinalizer(cd, Finalizer)
		run.End(ctx, &reterr)
		return ctrl.Result{}, reterr
	}
	released, err := r.reconcileDelete(ctx, cd)
	reterr = err
	run.End(ctx, &reterr)
	if released && run.Patched() {
		r.Recorder.Event(cd, corev1.EventTypeNormal, "Deprovisioned", "The agent-based install is torn down; the installed cluster, if any, is left as it is")
	}
	return ctrl.Result{}, reterr
}

// reconcileDelete deletes the ClusterDeployment's AgentClusterInstall and,
// once it is gone, removes the finalizer (released). Deleting the
// ClusterDeployment while its AgentClusterInstall is deleted again wakes
// this through the watch on AgentClusterInstalls.
func (r *Reconciler) reconcileDelete(ctx context.Context, cd *hivev1.ClusterDeployment) (released bool, _ error) {
	if !controllerutil.ContainsFinalizer(cd, Finalizer) {
		return false, nil
	}
	if name := installRef(cd); name != "" {
		aci := &hiveextv1.AgentClusterInstall{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: cd.Namespace, Name: name}, aci)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err == nil {
			if !aci.DeletionTimestamp.IsZero() {
				return false, nil // waiting for it to go
			}
			if err := r.Client.Delete(ctx, aci); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			r.Recorder.Eventf(cd, corev1.EventTypeNormal, "AgentClusterInstallDeleted",
				"Deleted AgentClusterInstall %s with the ClusterDeployment; waiting until it is gone", name)
			return false, nil
		}
	}
	controllerutil.RemoveFinalizer(cd, Finalizer)
	return true, nil
}
