package provisioning

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
	"github.com/metalshift/metalshift/internal/reconciler"
)

// +kubebuilder:rbac:groups=metal3.io,resources=provisionings,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=provisionings/status;provisionings/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusteroperators/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=config.openshift.io,resources=infrastructures,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=openshift-machine-api,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=openshift-machine-api,resources=secrets,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// DefaultRolloutTimeout is how long the metal3 Deployment may take to roll
// out after the operator's last write before it reports DeployTimedOut
// (upstream's).
const DefaultRolloutTimeout = 5 * time.Minute

// pausedRequeue is how soon a paused Provisioning is looked at again.
const pausedRequeue = time.Minute

// Reconciler reconciles the Provisioning singleton, the metal3 Deployment
// and the baremetal ClusterOperator, whichever of them changed: every event
// is a request for the singleton.
type Reconciler struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// Recorder records Events on the Provisioning.
	Recorder events.EventRecorder
	// Clock tells the time of transitions and of the rollout timeout.
	Clock clock.Clock
	// Operand is what the operator brings to the operand: the manager's
	// image and the operator's version.
	Operand metal3.Options
	// RolloutTimeout is how long a rollout may take; 0 means
	// DefaultRolloutTimeout.
	RolloutTimeout time.Duration
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.RolloutTimeout == 0 {
		r.RolloutTimeout = DefaultRolloutTimeout
	}
	singleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: metal3v1.ProvisioningSingletonName}}}
	})
	named := func(namespace, name string) builder.Predicates {
		return builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == namespace && o.GetName() == name
		}))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("baremetal-operator").
		For(&metal3v1.Provisioning{}, named("", metal3v1.ProvisioningSingletonName)).
		Watches(&configv1.Infrastructure{}, singleton, named("", configv1.InfrastructureName)).
		Watches(&configv1.ClusterOperator{}, singleton, named("", ClusterOperatorName)).
		Watches(&appsv1.Deployment{}, singleton, named(metal3.Namespace, metal3.DeploymentName)).
		// The deploy server's certificate holds the control-plane nodes'
		// addresses.
		Watches(&corev1.Node{}, singleton, builder.WithPredicates(controlPlaneAddresses())).
		Complete(r)
}

// controlPlaneAddresses passes the events of control-plane Nodes that
// change what the deploy server's certificate holds: one added or gone,
// its role or addresses changed.
func controlPlaneAddresses() predicate.Predicate {
	controlPlane := func(o client.Object) bool {
		_, ok := o.GetLabels()[metal3.ControlPlaneLabel]
		return ok
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return controlPlane(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return controlPlane(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, okBefore := e.ObjectOld.(*corev1.Node)
			after, okAfter := e.ObjectNew.(*corev1.Node)
			if !okBefore || !okAfter || controlPlane(before) != controlPlane(after) {
				return true
			}
			return controlPlane(after) && !equality.Semantic.DeepEqual(before.Status.Addresses, after.Status.Addresses)
		},
	}
}

// scope is what one reconcile has read so far.
type scope struct {
	// co is the baremetal ClusterOperator, as read at the start; its
	// status is written by End.
	co *configv1.ClusterOperator
	// platform is the cluster's platform.
	platform configv1.PlatformType
	// prov is the Provisioning singleton; nil when there is none.
	prov *metal3v1.Provisioning
	// provRun writes the Provisioning (its finalizer, its status) once
	// the reconcile is done; nil when there is none, or it is paused.
	provRun *reconciler.Run
	// deployment is the metal3 Deployment once applied; nil while another
	// owner holds it or it is being replaced.
	deployment *appsv1.Deployment
	// rep is what to report on the ClusterOperator; nil writes nothing.
	rep *report
}

// Reconcile brings the metal3 Deployment and the baremetal ClusterOperator
// in line with the platform and the Provisioning singleton. The
// ClusterOperator's status and the Provisioning (finalizer, status) are
// written at the end, as patches of what changed: the ClusterOperator
// first, so that a deleted Provisioning is let go only once the
// ClusterOperator says what the operator deployed is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	if req.Name != metal3v1.ProvisioningSingletonName || req.Namespace != "" {
		return ctrl.Result{}, nil // upstream ignores any other Provisioning
	}
	s := &scope{}
	var err error
	if s.co, err = r.ensureClusterOperator(ctx); err != nil {
		return ctrl.Result{}, err
	}
	coRun, err := reconciler.Start(r.Client, s.co)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		coRun.End(ctx, &reterr)
		if s.provRun != nil && (s.prov.DeletionTimestamp.IsZero() || coRun.Patched()) {
			s.provRun.End(ctx, &reterr)
		}
	}()
	if s.platform, err = r.platform(ctx); err != nil {
		return ctrl.Result{}, err
	}
	res, err = r.run(ctx, s)
	if err != nil || s.rep == nil {
		return res, err
	}
	r.setClusterOperatorStatus(ctx, s.co, *s.rep)
	return res, nil
}
