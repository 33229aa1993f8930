package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheBehindRequeue is how soon a reconcile that found the cache behind
// its reconciler's own last write (Writes.Behind) runs again at the latest:
// the write's watch event, once the cache has it, wakes it sooner.
const CacheBehindRequeue = time.Second

// Writes remembers the resourceVersion of the last write a manager's
// reconcilers made to each object of some kinds, until the manager's cache
// has caught up with it. A reconcile that reads an object from the cache
// older than its own last write would compute again what that write made
// (the same state change, with a new timestamp, written twice; a
// finalizer added twice): it waits for the cache instead (Behind).
//
// The writes are recorded by the client Client returns, and kept until
// Forget (the object gone). What Writes holds is only a saving: a manager
// that restarts without it reconciles from the cache as read, as any
// controller does.
type Writes struct {
	kinds map[string]bool

	mu sync.Mutex
	rv map[writeKey]string
}

type writeKey struct {
	kind string
	key  types.NamespacedName
}

// NewWrites returns the Writes of the kinds of objs (their Go types).
func NewWrites(objs ...client.Object) *Writes {
	w := &Writes{kinds: map[string]bool{}, rv: map[writeKey]string{}}
	for _, o := range objs {
		w.kinds[kindOf(o)] = true
	}
	return w
}

func kindOf(o client.Object) string { return fmt.Sprintf("%T", o) }

// Client returns c recording in w the writes it makes to w's kinds.
func (w *Writes) Client(c client.Client) client.Client {
	return &recordingClient{Client: c, record: func(obj client.Object, err error) error {
		if err == nil {
			w.wrote(obj)
		}
		return err
	}}
}

// Behind tells whether obj, as just read, is older than the last write
// recorded of it: the cache has not seen that write yet. A nil Writes has
// none.
func (w *Writes) Behind(obj client.Object) bool {
	cmp, ok := w.compare(obj)
	return ok && cmp < 0
}

// Current tells whether obj, as read, has the last write this process
// made to it: a field only this process's reconcilers write is, in that
// copy, as the API has it. False when no write of it is recorded (before
// this process first wrote it, e.g. after a restart or a change of
// leader), so that the caller asks the API instead.
func (w *Writes) Current(obj client.Object) bool {
	cmp, ok := w.compare(obj)
	return ok && cmp >= 0
}

// compare compares obj's resourceVersion with the last write recorded of
// it; ok is false when none is (or the versions do not compare).
func (w *Writes) compare(obj client.Object) (cmp int, ok bool) {
	if w == nil {
		return 0, false
	}
	k := writeKey{kind: kindOf(obj), key: client.ObjectKeyFromObject(obj)}
	w.mu.Lock()
	wrote, ok := w.rv[k]
	w.mu.Unlock()
	if !ok {
		return 0, false
	}
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), wrote)
	return cmp, err == nil
}

// Forget drops what w holds of an object gone from the cache.
func (w *Writes) Forget(obj client.Object, key types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, writeKey{kind: kindOf(obj), key: key})
}

// wrote records a write of obj (the object as the API returned it).
func (w *Writes) wrote(obj client.Object) {
	k := writeKey{kind: kindOf(obj), key: client.ObjectKeyFromObject(obj)}
	if !w.kinds[k.kind] || obj.GetResourceVersion() == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.rv[k]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), prev); err == nil && cmp < 0 {
			return
		}
	}
	w.rv[k] = obj.GetResourceVersion()
}

// recordingClient is a client that hands each write's outcome (the object
// as the API returned it, and the error) to record: the one client that
// Writes.Client and OwnWrites both build on.
type recordingClient struct {
	client.Client
	record func(obj client.Object, err error) error
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.record(obj, c.Client.Create(ctx, obj, opts...))
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.record(obj, c.Client.Update(ctx, obj, opts...))
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.record(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c *recordingClient) Status() client.SubResourceWriter {
	return &recordingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

// recordingStatus records the status writes of a recordingClient.
type recordingStatus struct {
	client.SubResourceWriter
	c *recordingClient
}

func (s *recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.record(obj, s.SubResourceWriter.Update(ctx, obj, opts...))
}

func (s *recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.c.record(obj, s.SubResourceWriter.Patch(ctx, obj, patch, opts...))
}
