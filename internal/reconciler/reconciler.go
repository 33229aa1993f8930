package reconciler

import (
	"context"
	"encoding/json"
	"errors"
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

// Run is one reconcile of one object, from Begin (or Start) to End.
type Run struct {
	obj     client.Object
	helper  *patch.Helper
	owned   []string
	patched bool

	// c and before: a Run started with LockStatus or OneStatusWrite
	// writes without the helper, from the object as read.
	c      client.Client
	before client.Object
	// oneStatusWrite: the status, conditions included, in one patch.
	oneStatusWrite bool
	// unlocked: the status first, as with LockStatus, but with no
	// resourceVersion (StatusFirst).
	unlocked bool
}

// Option is an option of Start.
type Option func(*Run)

// OwnedConditions are the condition types (metav1 conditions in
// status.conditions) this reconciler writes: End patches them over any
// other writer's, and merges the others' with its own.
func OwnedConditions(types ...string) Option {
	return func(r *Run) { r.owned = append(r.owned, types...) }
}

// LockStatus makes End write the status under an optimistic lock (with
// the resourceVersion read): for a status field that has two writers,
// such as a list of hive-style conditions another component adds to,
// which a merge patch replaces whole. The status goes first; when it lost
// a conflict nothing else is written and End reports the conflict, which
// RequeueOnConflict turns into a requeue.
func LockStatus() Option {
	return func(r *Run) { r.before = r.obj.DeepCopyObject().(client.Object) }
}

// StatusFirst makes End write the status first, as a merge patch of the
// fields that changed with no resourceVersion, and then, when that
// succeeded, the metadata and spec: a reconcile can record in the
// metadata that the status it computed is stored (an annotation of what
// it applied) in the write it makes anyway, where after the patch
// helper's order (metadata first) that would take a write of its own.
func StatusFirst() Option {
	return func(r *Run) {
		r.before = r.obj.DeepCopyObject().(client.Object)
		r.unlocked = true
	}
}

// OneStatusWrite makes End write the status in one patch, the owned
// conditions with the other fields that changed, where the patch helper
// writes the conditions in a patch of their own: half the status writes
// of a reconcile that changes both. A patch without a condition change
// carries the changed fields only, with no resourceVersion, as without
// the option. One with a condition change carries the whole list of
// conditions, and so the resourceVersion read; after a conflict, End
// reads the object again and applies the reconcile's changes to it (its
// owned conditions over the others', its status fields over the ones
// read), as the helper does for conditions. It does so before the first
// attempt when it patched the metadata or spec just before, which made
// the version read old. Reads for that go through the client Start was
// given.
func OneStatusWrite() Option {
	return func(r *Run) {
		r.before = r.obj.DeepCopyObject().(client.Object)
		r.oneStatusWrite = true
	}
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

// Start starts the reconcile of an object that belongs to no Cluster (a
// BareMetalHost, an Agent, an InfraEnv, a Provisioning...): nothing pauses
// it. End writes what the reconcile changed as patches of the changed
// fields only — metadata and spec in one, status through its subresource
// in another — without a resourceVersion: a writer of other fields of the
// same object never conflicts with it, and none of its fields is replaced
// by a stale copy. Each status field has one writer (docs/development.md).
func Start(c client.Client, obj client.Object, opts ...Option) (*Run, error) {
	helper, err := patch.NewHelper(obj, c)
	if err != nil {
		return nil, err
	}
	r := &Run{obj: obj, helper: helper, c: c}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// End patches the object with what the reconcile changed. With *reterr
// nil the reconcile succeeded and status.observedGeneration (when the
// object has one) becomes the generation; a patch error joins *reterr. An
// object deleted meanwhile (its last finalizer removed) is not an error.
func (r *Run) End(ctx context.Context, reterr *error) {
	if o, ok := r.obj.(interface{ SetObservedGeneration(int64) }); ok && *reterr == nil {
		o.SetObservedGeneration(r.obj.GetGeneration())
	}
	if r.oneStatusWrite {
		r.endOneStatusWrite(ctx, reterr)
		return
	}
	if r.before != nil {
		r.endLocked(ctx, reterr)
		return
	}
	var opts []patch.Option
	if len(r.owned) > 0 {
		opts = append(opts, patch.WithOwnedConditions{Conditions: r.owned})
	}
	err := r.helper.Patch(ctx, r.obj, opts...)
	r.patched = err == nil
	if err != nil && !notFound(err) {
		*reterr = kerrors.NewAggregate([]error{*reterr, err})
	}
}

// endLocked writes the status with the resourceVersion read (without it
// for StatusFirst), then, when that held, the rest (metadata and spec) as
// a merge patch of what changed.
func (r *Run) endLocked(ctx context.Context, reterr *error) {
	fail := func(err error) {
		if *reterr == nil {
			*reterr = err // unwrapped: RequeueOnConflict must see a conflict
		} else {
			*reterr = kerrors.NewAggregate([]error{*reterr, err})
		}
	}
	changed, err := changedFields(r.before, r.obj)
	if err != nil {
		fail(err)
		return
	}
	if _, ok := changed["status"]; ok {
		// The status alone (with the resourceVersion read, unless
		// StatusFirst); written from a copy, for the response not to undo
		// the changes written next.
		o := r.obj.DeepCopyObject().(client.Object)
		p := client.MergeFromWithOptions(r.before, client.MergeFromWithOptimisticLock{})
		if r.unlocked {
			p = client.MergeFrom(r.before)
		}
		err := r.c.Status().Patch(ctx, o, p)
		switch {
		case apierrors.IsNotFound(err):
			r.patched = false
			return
		case err != nil:
			fail(err)
			return
		}
		r.obj.SetResourceVersion(o.GetResourceVersion())
	}
	delete(changed, "status")
	if len(changed) > 0 {
		// Metadata and spec (the main resource ignores the status), with
		// no resourceVersion: the diff is of the object as read.
		o := r.obj.DeepCopyObject().(client.Object)
		o.SetResourceVersion(r.before.GetResourceVersion())
		if err := r.c.Patch(ctx, o, client.MergeFrom(r.before)); err != nil {
			if !apierrors.IsNotFound(err) {
				fail(err)
			}
			return
		}
		r.obj.SetResourceVersion(o.GetResourceVersion())
	}
	r.patched = true
}

// changedFields is the merge patch from before to after, by top-level
// field (metadata, spec, status...).
func changedFields(before, after client.Object) (map[string]json.RawMessage, error) {
	diff, err := client.MergeFrom(before).Data(after)
	if err != nil {
		return nil, err
	}
	changed := map[string]json.RawMessage{}
	if err := json.Unmarshal(diff, &changed); err != nil {
		return nil, err
	}
	return changed, nil
}

// notFound tells whether every error in err, an aggregate of the patch
// helper's (metadata, spec, status, wrapped), is a NotFound.
func notFound(err error) bool {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if !notFound(e) {
				return false
			}
		}
		return len(agg.Errors()) > 0
	}
	return apierrors.IsNotFound(err)
}

// Patched tells, after End, whether the object's patch succeeded (or had
// nothing to write): what the reconcile changed in the status is stored,
// and a metric of a transition it made may be recorded.
func (r *Run) Patched() bool { return r.patched }

// ConflictRequeue is how soon a reconcile whose write lost a conflict runs
// again at the latest; the newer object's watch event usually wakes it
// sooner.
const ConflictRequeue = time.Second

// RequeueOnConflict turns a conflict into a requeue: a write made with an
// optimistic lock (an Update, or a patch with a resourceVersion) lost to
// another writer, and the reconcile must run again on the newer object —
// never drop the write, never log it as a failure.
func RequeueOnConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return Soonest(res, ctrl.Result{RequeueAfter: ConflictRequeue}), nil
	}
	return res, err
}

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
