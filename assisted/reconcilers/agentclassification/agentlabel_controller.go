package agentclassification

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/shard"
)

// LabelReconciler is the label controller: it classifies an Agent by the
// AgentClassifications of its namespace (Classify) and writes its labels.
type LabelReconciler struct {
	Client client.Client
	// WatchFilterValue restricts the reconciler to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means all (package shard).
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agents,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agent-install.openshift.io,resources=agentclassifications,verbs=get;list;watch

// SetupWithManager registers the reconciler. An Agent is classified again
// when it is created, when its inventory or labels change, and when any
// classification of its namespace changes.
func (r *LabelReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentinstallv1.Agent{}, builder.WithPredicates(inventoryOrLabelsChanged, predicates.ResourceHasFilterLabel(mgr.GetScheme(), mgr.GetLogger(), r.WatchFilterValue))).
		Watches(&agentinstallv1.AgentClassification{}, handler.EnqueueRequestsFromMapFunc(r.agentsOf)).
		WithOptions(opts).
		Named("agentlabel").
		Complete(r)
}

// inventoryOrLabelsChanged lets through the Agent events that can change a
// classification: a new Agent, a new inventory, labels edited. Progress and
// heartbeats cannot.
var inventoryOrLabelsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*agentinstallv1.Agent)
		updated, okNew := e.ObjectNew.(*agentinstallv1.Agent)
		if !okOld || !okNew {
			return true
		}
		return !maps.Equal(old.Labels, updated.Labels) || !equality.Semantic.DeepEqual(old.Status.Inventory, updated.Status.Inventory)
	},
	DeleteFunc: func(event.DeleteEvent) bool { return false },
}

// agentsOf wakes the Agents of a classification's namespace.
func (r *LabelReconciler) agentsOf(ctx context.Context, o client.Object) []ctrl.Request {
	l := &agentinstallv1.AgentList{}
	if err := r.Client.List(ctx, l, append(shard.ListOptions(r.WatchFilterValue), client.InNamespace(o.GetNamespace()))...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Agents of an AgentClassification's namespace", "AgentClassification", klog.KObj(o))
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(l.Items))
	for i := range l.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
	}
	return reqs
}

// Reconcile sets an Agent's classification labels.
func (r *LabelReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	a := &agentinstallv1.Agent{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil || !shard.Owns(r.WatchFilterValue, a) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	classifications := &agentinstallv1.AgentClassificationList{}
	if err := r.Client.List(ctx, classifications, append(shard.ListOptions(r.WatchFilterValue), client.InNamespace(a.Namespace))...); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the AgentClassifications: %w", err)
	}
	inventory, err := Inventory(&a.Status.Inventory)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the inventory: %w", err)
	}
	// End writes the labels alone (a merge patch of what changed):
	// whatever else changed meanwhile stays, and a newer inventory wakes
	// the Agent again. The Agent's status is the Agent reconciler's.
	run, err := reconciler.Start(r.Client, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	changed := Classify(ctx, a.Labels, classifications.Items, inventory)
	run.End(ctx, &reterr)
	if changed && run.Patched() {
		ctrl.LoggerFrom(ctx).V(1).Info("Classified the Agent", "labels", a.Labels)
	}
	return ctrl.Result{}, reterr
}
