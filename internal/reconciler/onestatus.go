package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"
)

// statusAttempts is how often End writes a status whose conditions lost a
// conflict, reading the object again each time.
const statusAttempts = 5

// endOneStatusWrite writes the metadata and spec that changed as one merge
// patch, then the status as another (see OneStatusWrite).
func (r *Run) endOneStatusWrite(ctx context.Context, reterr *error) {
	fail := func(err error) {
		if !notFound(err) {
			*reterr = kerrors.NewAggregate([]error{*reterr, err})
		}
	}
	changed, err := changedFields(r.before, r.obj)
	if err != nil {
		fail(err)
		return
	}
	status, hasStatus := changed["status"]
	delete(changed, "status")
	metaPatched := len(changed) > 0
	if metaPatched {
		o := r.obj.DeepCopyObject().(client.Object)
		o.SetResourceVersion(r.before.GetResourceVersion())
		if err := r.c.Patch(ctx, o, client.MergeFrom(r.before)); err != nil {
			fail(err)
			return
		}
		r.obj.SetResourceVersion(o.GetResourceVersion())
	}
	if hasStatus {
		if err := r.patchStatus(ctx, status, metaPatched); err != nil {
			fail(err)
			return
		}
	}
	r.patched = true
}

// patchStatus writes the status changes (statusDiff, a JSON merge patch
// of the status) in one patch; metaPatched says End patched the metadata
// or spec first.
func (r *Run) patchStatus(ctx context.Context, statusDiff json.RawMessage, metaPatched bool) error {
	before, beforeOK := r.before.(conditions.Getter)
	after, afterOK := r.obj.(conditions.Getter)
	if !beforeOK || !afterOK || equality.Semantic.DeepEqual(before.GetConditions(), after.GetConditions()) {
		// No condition changed: the changed fields alone, each of which
		// this reconciler is the one writer of.
		o := r.obj.DeepCopyObject().(client.Object)
		o.SetResourceVersion(r.before.GetResourceVersion())
		if err := r.c.Status().Patch(ctx, o, client.MergeFrom(r.before)); err != nil {
			return err
		}
		r.obj.SetResourceVersion(o.GetResourceVersion())
		return nil
	}
	conds, err := conditions.NewPatch(before, after)
	if err != nil {
		return err
	}
	// The status changes other than the conditions, to apply to a newer
	// object after a conflict.
	var others map[string]json.RawMessage
	if err := json.Unmarshal(statusDiff, &others); err != nil {
		return err
	}
	delete(others, "conditions")
	rest, err := json.Marshal(map[string]any{"status": others})
	if err != nil {
		return err
	}
	latest := r.before.DeepCopyObject().(client.Object)
	want := r.obj.DeepCopyObject().(client.Object)
	// After a metadata patch, the copy read is no longer the latest
	// version: a patch carrying its resourceVersion would be refused, so
	// the status goes onto the object read again from the first attempt.
	reread := metaPatched
	for attempt := 1; ; attempt++ {
		if reread {
			latest = r.before.DeepCopyObject().(client.Object)
			if err := r.c.Get(ctx, client.ObjectKeyFromObject(r.obj), latest); err != nil {
				return err
			}
			if want, err = applyStatus(latest, rest, conds, r.owned); err != nil {
				return err
			}
		}
		base := latest.DeepCopyObject().(client.Object)
		err := r.c.Status().Patch(ctx, want, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			r.obj.SetResourceVersion(want.GetResourceVersion())
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == statusAttempts {
			return err
		}
		reread = true
	}
}

// applyStatus is latest with a reconcile's status changes applied: rest
// (a JSON merge patch of the fields other than the conditions) and conds
// (its condition changes, its owned conditions over the others').
func applyStatus(latest client.Object, rest []byte, conds conditions.Patch, owned []string) (client.Object, error) {
	cur, err := json.Marshal(latest)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(cur, rest)
	if err != nil {
		return nil, err
	}
	// A new object: unmarshalling into a copy of latest would keep the
	// fields the patch removes.
	want := reflect.New(reflect.TypeOf(latest).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(merged, want); err != nil {
		return nil, err
	}
	setter, ok := want.(conditions.Setter)
	if !ok {
		return nil, fmt.Errorf("%T has no conditions to set", want)
	}
	if err := conds.Apply(setter, conditions.OwnedConditionTypes(owned)); err != nil {
		return nil, err
	}
	return want, nil
}
