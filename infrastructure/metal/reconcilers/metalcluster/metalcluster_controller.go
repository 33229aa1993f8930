package metalcluster

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// Reconciler reconciles MetalCluster objects.
type Reconciler struct {
	Client client.Client

	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=metalclusters;metalclusters/status;metalclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MetalCluster{}).
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(
			util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("MetalCluster"), mgr.GetClient(), &infrav1.MetalCluster{}),
		), builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log))).
		Complete(r)
}

// Reconcile brings one MetalCluster to its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	mc := &infrav1.MetalCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if finalizerAdded, err := finalizers.EnsureFinalizer(ctx, r.Client, mc, infrav1.MetalClusterFinalizer); err != nil || finalizerAdded {
		return ctrl.Result{}, err
	}

	cluster, err := util.GetOwnerCluster(ctx, r.Client, mc.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting the owner Cluster: %w", err)
	}
	log := ctrl.LoggerFrom(ctx)
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	}
	run, stop, err := reconciler.Begin(ctx, r.Client, cluster, mc, infrav1.MetalClusterReadyCondition)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		setStatus(mc)
		run.End(ctx, &reterr)
	}()

	if !mc.DeletionTimestamp.IsZero() {
		// Nothing outside the object belongs to a MetalCluster yet.
		controllerutil.RemoveFinalizer(mc, infrav1.MetalClusterFinalizer)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, nil
}
