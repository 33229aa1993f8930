package reconciler

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
)

// Object is what the skeleton reconciles: a Kubernetes object with
// conditions and an observed generation in its status.
type Object interface {
	client.Object
	conditions.Setter
	// SetObservedGeneration sets status.observedGeneration.
	SetObservedGeneration(int64)
}

// Run is one reconcile of one object, from Begin to End.
type Run struct {
	obj     Object
	helper  *patch.Helper
	owned   []string
	patched bool
}

// Begin starts the reconcile of obj, which belongs to cluster (nil when
// it has none yet). It sets the Paused condition, patching it at once when
// it changed; stop says the reconcile ends here (paused, or the condition
// just written: the write wakes the object again). owned are the condition
// types this reconciler writes; End patches them over any other writer.
func Begin(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, obj Object, owned ...string) (run *Run, stop bool, err error) {
	// The helper first: when only the generation changed, the paused
	// condition is updated in memory, and End must see that as a change.
	helper, err := patch.NewHelper(obj, c)
	if err != nil {
		return nil, true, err
	}
	isPaused, requeue, err := paused.EnsurePausedCondition(ctx, c, cluster, obj)
	if err != nil || isPaused || requeue {
		return nil, true, err
	}
	return &Run{obj: obj, helper: helper, owned: append(owned, clusterv1.PausedCondition)}, false, nil
}

// End patches the object with what the reconcile changed. With *reterr
// nil the reconcile succeeded and status.observedGeneration becomes the
// generation; a patch error joins *reterr. An object deleted meanwhile
// (its last finalizer removed) is not an error.
func (r *Run) End(ctx context.Context, reterr *error) {
	if *reterr == nil {
		r.obj.SetObservedGeneration(r.obj.GetGeneration())
	}
	err := r.helper.Patch(ctx, r.obj, patch.WithOwnedConditions{Conditions: r.owned})
	r.patched = err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		*reterr = kerrors.NewAggregate([]error{*reterr, err})
	}
}

// Patched tells, after End, whether the object's patch succeeded (or had
// nothing to write): what the reconcile changed in the status is stored,
// and a metric of a transition it made may be recorded.
func (r *Run) Patched() bool { return r.patched }

// Phase is one step of a reconcile over scope S.
type Phase[S any] func(ctx context.Context, s S) (ctrl.Result, error)

// Phases runs phases in order over s. It stops at the first error, and
// returns the soonest requeue any phase asked for.
func Phases[S any](ctx context.Context, s S, phases ...Phase[S]) (ctrl.Result, error) {
	var res ctrl.Result
	for _, phase := range phases {
		r, err := phase(ctx, s)
		res = Soonest(res, r)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// Soonest is the result that requeues first: the shorter of two delays,
// where zero means no requeue.
func Soonest(a, b ctrl.Result) ctrl.Result {
	return ctrl.Result{RequeueAfter: minPositive(a.RequeueAfter, b.RequeueAfter)}
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	default:
		return min(a, b)
	}
}
