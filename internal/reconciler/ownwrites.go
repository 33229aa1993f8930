package reconciler

import (
	"context"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnWrites is a client that reads its own writes: a Get of an object of
// its kinds that it wrote returns the copy its last write got back from
// the API while the reader it wraps (a cache) has an older one. A server
// that decides on each request whether to write (an agent's contact once
// a minute, a report that changed) so decides on what it last wrote, not
// on a cache that has not seen it: with the cache behind (a saturated API
// server whose watch lags), deciding on the cache would write again on
// every request, and load the API server further.
//
// What it holds is only a saving: a copy is dropped once the reader has
// caught up with it, or the reader finds the object gone, and a process
// restarted without them reads the cache as any client does. Lists are
// the reader's.
type OwnWrites struct {
	recordingClient
	kinds map[string]bool

	mu   sync.Mutex
	objs map[writeKey]client.Object
}

// NewOwnWrites returns c reading its own writes of the kinds of objs.
func NewOwnWrites(c client.Client, objs ...client.Object) *OwnWrites {
	o := &OwnWrites{kinds: map[string]bool{}, objs: map[writeKey]client.Object{}}
	o.recordingClient = recordingClient{Client: c, record: o.wrote}
	for _, obj := range objs {
		o.kinds[kindOf(obj)] = true
	}
	return o
}

// Get reads obj from the wrapped client, or its last written copy when
// that is newer.
func (o *OwnWrites) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := o.Client.Get(ctx, key, obj, opts...)
	k := writeKey{kind: kindOf(obj), key: key}
	if !o.kinds[k.kind] {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	written, ok := o.objs[k]
	if !ok {
		return err
	}
	if err != nil {
		delete(o.objs, k) // gone (or unreadable): the reader decides
		return err
	}
	if cmp, cerr := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), written.GetResourceVersion()); cerr != nil || cmp >= 0 {
		delete(o.objs, k) // the reader has caught up
		return nil
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(written.DeepCopyObject()).Elem())
	return nil
}

// wrote keeps obj as the API returned it from a write.
func (o *OwnWrites) wrote(obj client.Object, err error) error {
	k := writeKey{kind: kindOf(obj), key: client.ObjectKeyFromObject(obj)}
	if err != nil || !o.kinds[k.kind] || obj.GetResourceVersion() == "" {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, ok := o.objs[k]; ok {
		if cmp, cerr := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), prev.GetResourceVersion()); cerr == nil && cmp < 0 {
			return nil
		}
	}
	o.objs[k] = obj.DeepCopyObject().(client.Object)
	return nil
}

// Delete deletes obj and forgets its written copy.
func (o *OwnWrites) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o.mu.Lock()
	delete(o.objs, writeKey{kind: kindOf(obj), key: client.ObjectKeyFromObject(obj)})
	o.mu.Unlock()
	return o.Client.Delete(ctx, obj, opts...)
}
