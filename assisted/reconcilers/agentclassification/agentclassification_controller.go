package agentclassification

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/predicates"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// Finalizer keeps an AgentClassification until no Agent carries its label
// with its value (upstream's name).
const Finalizer = "agentclassification.agent-install.openshift.io"

// Reconciler is the classification controller: it counts the Agents the
// label controller classified into an AgentClassification's status and
// releases its finalizer once, deleted, no Agent matches it any more.
type Reconciler struct {
	Client client.Client
	// Clock stamps the QueryErrors condition's transitions; nil means the
	// real clock.
	Clock clock.PassiveClock
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agentclassifications;agentclassifications/status;agentclassifications/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents,verbs=get;list;watch

// SetupWithManager registers the reconciler. Its classifications are
// counted again whenever an Agent of their namespace comes, goes or has
// its labels changed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentinstallv1.AgentClassification{}, builder.WithPredicates(predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&agentinstallv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.classificationsOf),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(opts).
		Named("agentclassification").
		Complete(r)
}

// classificationsOf wakes the classifications of an Agent's namespace.
func (r *Reconciler) classificationsOf(ctx context.Context, o client.Object) []ctrl.Request {
	l := &agentinstallv1.AgentClassificationList{}
	if err := r.Client.List(ctx, l, append(shard.ListOptions(r.WatchFilterValue), client.InNamespace(o.GetNamespace()))...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the AgentClassifications of an Agent's namespace", "Agent", klog.KObj(o))
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(l.Items))
	for i := range l.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
	}
	return reqs
}

// Reconcile counts an AgentClassification's Agents and, when it is being
// deleted and none matches any more, lets it go.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	c := &agentinstallv1.AgentClassification{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil || !shard.Owns(r.WatchFilterValue, c) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if added, err := finalizers.EnsureFinalizer(ctx, r.Client, c, Finalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	run, err := reconciler.Start(r.Client, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer run.End(ctx, &reterr)
	agents := &agentinstallv1.AgentList{}
	if err := r.Client.List(ctx, agents, append(shard.ListOptions(r.WatchFilterValue), client.InNamespace(c.Namespace))...); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the Agents: %w", err)
	}
	matched, failed := Count(agents.Items, c)
	if !c.DeletionTimestamp.IsZero() && matched == 0 {
		// The label controller removed the labels of a deleted
		// classification; those of failed Agents do not hold it back.
		controllerutil.RemoveFinalizer(c, Finalizer)
	} else {
		setStatus(&c.Status, matched, failed, r.Clock.Now())
	}
	return ctrl.Result{}, nil
}
