package kubeapi

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// object is a stored object. Once stored it is never changed: a write
// stores a new one.
type object struct {
	// raw is the object's JSON.
	raw []byte
	// obj is raw decoded (numbers as json.Number).
	obj       map[string]any
	namespace string
	name      string
	labels    labels.Set
	rv        uint64
}

// newObject encodes obj with resource version rv.
func newObject(obj map[string]any, rv uint64) (*object, error) {
	meta := metadata(obj)
	meta["resourceVersion"] = strconv.FormatUint(rv, 10)
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	canon, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	o := &object{raw: raw, obj: canon, rv: rv, labels: labels.Set{}}
	o.namespace, _ = meta["namespace"].(string)
	o.name, _ = meta["name"].(string)
	if ls, ok := meta["labels"].(map[string]any); ok {
		for k, v := range ls {
			o.labels[k], _ = v.(string)
		}
	}
	return o, nil
}

// copyObj returns a deep copy of the object's content, to change.
func (o *object) copyObj() map[string]any {
	c, _ := decodeJSON(o.raw)
	return c
}

// decodeJSON decodes a JSON object, keeping numbers as they were written.
func decodeJSON(data []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// metadata returns obj's metadata map, creating it when missing.
func metadata(obj map[string]any) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

type key struct{ namespace, name string }

// event is a change, as watches see it.
type event struct {
	typ watch.EventType
	gr  schema.GroupResource
	obj *object
}

// historySize is how many past events a watch may at least start from.
const historySize = 4096

// store keeps the objects, by group/resource, and the recent events. The
// server's lock guards it.
type store struct {
	rv       uint64
	objects  map[schema.GroupResource]map[key]*object
	history  []event
	watchers map[*watcher]struct{}
}

func newStore() *store {
	return &store{rv: 1, objects: map[schema.GroupResource]map[key]*object{}, watchers: map[*watcher]struct{}{}}
}

func (s *store) get(gr schema.GroupResource, ns, name string) *object {
	return s.objects[gr][key{ns, name}]
}

// list returns the objects of gr in ns ("" for all) in key order.
func (s *store) list(gr schema.GroupResource, ns string) []*object {
	var out []*object
	for k, o := range s.objects[gr] {
		if ns == "" || k.namespace == ns {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].namespace != out[j].namespace {
			return out[i].namespace < out[j].namespace
		}
		return out[i].name < out[j].name
	})
	return out
}

// put stores obj with the next resource version and tells the watches.
func (s *store) put(gr schema.GroupResource, obj map[string]any, typ watch.EventType) (*object, error) {
	o, err := newObject(obj, s.rv+1)
	if err != nil {
		return nil, err
	}
	s.rv++
	if s.objects[gr] == nil {
		s.objects[gr] = map[key]*object{}
	}
	s.objects[gr][key{o.namespace, o.name}] = o
	s.publish(event{typ: typ, gr: gr, obj: o})
	return o, nil
}

// remove deletes an object; watches see its last state at a new version.
func (s *store) remove(gr schema.GroupResource, o *object) {
	delete(s.objects[gr], key{o.namespace, o.name})
	last, err := newObject(o.copyObj(), s.rv+1)
	if err != nil {
		return
	}
	s.rv++
	s.publish(event{typ: watch.Deleted, gr: gr, obj: last})
}

func (s *store) publish(e event) {
	if len(s.history) == 2*historySize {
		// Keep the last historySize, moved once every historySize events.
		s.history = append(s.history[:0], s.history[historySize:]...)
	}
	s.history = append(s.history, e)
	for w := range s.watchers {
		if w.gr != e.gr {
			continue
		}
		select {
		case w.ch <- e:
		default:
			// Too slow: end its watch, as kube-apiserver does; the
			// client watches again from the last version it saw.
			close(w.ch)
			delete(s.watchers, w)
		}
	}
}

// since returns the events of gr after version rv; false when they are no
// longer all known (the watch must start over with a list).
func (s *store) since(gr schema.GroupResource, rv uint64) ([]event, bool) {
	if rv >= s.rv {
		return nil, true
	}
	if len(s.history) == 0 || s.history[0].obj.rv > rv+1 {
		return nil, false
	}
	var out []event
	for _, e := range s.history {
		if e.obj.rv > rv && e.gr == gr {
			out = append(out, e)
		}
	}
	return out, true
}

// watcher is one watch's subscription.
type watcher struct {
	gr schema.GroupResource
	ch chan event
}

func (s *store) subscribe(gr schema.GroupResource) *watcher {
	w := &watcher{gr: gr, ch: make(chan event, 256)}
	s.watchers[w] = struct{}{}
	return w
}

func (s *store) unsubscribe(w *watcher) {
	if _, ok := s.watchers[w]; ok {
		delete(s.watchers, w)
		close(w.ch)
	}
}
