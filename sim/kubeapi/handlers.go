package kubeapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/google/uuid"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"
)

// maxBody bounds a request body.
const maxBody = 8 << 20

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, req *apiRequest, u *user) {
	var (
		o    *object
		err  error
		code = http.StatusOK
	)
	switch req.verb {
	case "get":
		s.mu.RLock()
		o = s.store.get(req.res.gvr.GroupResource(), req.namespace, req.name)
		s.mu.RUnlock()
		if o == nil {
			err = apierrors.NewNotFound(req.res.gvr.GroupResource(), req.name)
		}
	case "list":
		s.list(w, r, req)
		return
	case "watch":
		s.watch(w, r, req)
		return
	case "create":
		var obj map[string]any
		if obj, err = s.decodeBody(r, req.res); err == nil {
			o, err = s.createObject(req, obj, u)
			code = http.StatusCreated
		}
	case "update":
		var obj map[string]any
		if obj, err = s.decodeBody(r, req.res); err == nil {
			o, err = s.updateObject(req, func(*object) (map[string]any, error) { return obj, nil })
		}
	case "patch":
		o, err = s.patch(r, req)
	case "delete":
		var deleted bool
		if o, deleted, err = s.deleteObject(req); err == nil && deleted {
			writeJSON(w, http.StatusOK, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
				Details: &metav1.StatusDetails{Name: req.name, Group: req.res.gvr.Group, Kind: req.res.gvr.Resource, UID: uidOf(o)}})
			return
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, code, s.encode(o, req.res))
}

// encode returns o's JSON at the version res serves.
func (s *Server) encode(o *object, res *resource) []byte {
	if gv := res.gvr.GroupVersion().String(); o.obj["apiVersion"] != gv {
		c := o.copyObj()
		c["apiVersion"] = gv
		if data, err := json.Marshal(c); err == nil {
			return data
		}
	}
	return o.raw
}

func uidOf(o *object) types.UID {
	uid, _ := metadata(o.obj)["uid"].(string)
	return types.UID(uid)
}

// decodeBody reads an object in JSON, YAML or (built-in types) protobuf.
func (s *Server) decodeBody(r *http.Request, res *resource) (map[string]any, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "", "application/json":
	case "application/yaml":
		if body, err = yaml.YAMLToJSON(body); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	case "application/vnd.kubernetes.protobuf":
		if !res.typed {
			return nil, unsupported(mt)
		}
		obj, _, err := s.codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if body, err = json.Marshal(obj); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	default:
		return nil, unsupported(mt)
	}
	obj, err := decodeJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	return obj, nil
}

func unsupported(mediaType string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType, Message: fmt.Sprintf("the simulated API server does not take %q", mediaType)}}
}

// createObject stores a new object.
func (s *Server) createObject(req *apiRequest, obj map[string]any, u *user) (*object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, gr := req.res, req.res.gvr.GroupResource()
	meta := metadata(obj)
	name, _ := meta["name"].(string)
	if gen, _ := meta["generateName"].(string); name == "" && gen != "" {
		name = gen + rand.String(5)
		meta["name"] = name
	}
	if name == "" {
		return nil, apierrors.NewBadRequest("name or generateName is required")
	}
	ns, _ := meta["namespace"].(string)
	switch {
	case !res.namespaced:
		delete(meta, "namespace")
		ns = ""
	case ns != "" && ns != req.namespace:
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	case req.namespace == "":
		return nil, apierrors.NewBadRequest("a namespaced object is created under namespaces/<namespace>/")
	default:
		ns = req.namespace
		meta["namespace"] = ns
		if s.store.get(namespacesGR, "", ns) == nil {
			return nil, apierrors.NewNotFound(namespacesGR, ns)
		}
	}
	if s.store.get(gr, ns, name) != nil {
		return nil, apierrors.NewAlreadyExists(gr, name)
	}
	obj["apiVersion"], obj["kind"] = res.gvr.GroupVersion().String(), res.kind
	meta["uid"] = uuid.NewString()
	meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	for _, k := range []string{"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"} {
		delete(meta, k)
	}
	if tracksGeneration(res) {
		meta["generation"] = 1
	}
	if res.status && !res.keepStatusOnCreate {
		delete(obj, "status")
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	switch gr {
	case secretsGR:
		stringData(obj)
	case csrsGR:
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			return nil, apierrors.NewBadRequest("a CertificateSigningRequest needs a spec")
		}
		spec["username"], spec["groups"], spec["uid"] = u.name, u.groups, ""
	case namespacesGR:
		obj["status"] = map[string]any{"phase": "Active"}
	case crdsGR:
		var err error
		if crd, err = establish(obj); err != nil {
			return nil, err
		}
	}
	o, err := s.store.put(gr, obj, watch.Added)
	if err == nil && crd != nil {
		s.reg.addCRD(crd)
	}
	return o, err
}

func tracksGeneration(res *resource) bool { return res.status || res.crd != "" }

// stringData moves a Secret's stringData into its data, as the API does.
func stringData(obj map[string]any) {
	sd, _ := obj["stringData"].(map[string]any)
	if len(sd) == 0 {
		delete(obj, "stringData")
		return
	}
	data, _ := obj["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		str, _ := v.(string)
		data[k] = base64.StdEncoding.EncodeToString([]byte(str))
	}
	obj["data"] = data
	delete(obj, "stringData")
}

// establish checks a CustomResourceDefinition and sets its status as the
// API's CRD controllers do once it is served.
func establish(obj map[string]any) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(data, crd); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	n := crd.Spec.Names
	if crd.Spec.Group == "" || n.Plural == "" || n.Kind == "" || crd.Name != n.Plural+"."+crd.Spec.Group {
		return nil, apierrors.NewBadRequest("a CustomResourceDefinition needs a group, names.plural and names.kind, and the name <plural>.<group>")
	}
	var stored []any
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			stored = append(stored, v.Name)
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	accepted := map[string]any{"plural": n.Plural, "singular": n.Singular, "kind": n.Kind, "listKind": n.ListKind}
	if len(n.ShortNames) > 0 {
		accepted["shortNames"] = n.ShortNames
	}
	obj["status"] = map[string]any{
		"acceptedNames": accepted, "storedVersions": stored,
		"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
			map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
		},
	}
	return crd, nil
}

// updateObject replaces an object with what next makes of it: the whole
// object, or its status (or approval) for a subresource.
func (s *Server) updateObject(req *apiRequest, next func(cur *object) (map[string]any, error)) (*object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, gr := req.res, req.res.gvr.GroupResource()
	cur := s.store.get(gr, req.namespace, req.name)
	if cur == nil {
		return nil, apierrors.NewNotFound(gr, req.name)
	}
	in, err := next(cur)
	if err != nil {
		return nil, err
	}
	meta := metadata(in)
	if name, _ := meta["name"].(string); name != "" && name != req.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, req.name))
	}
	if rv, _ := meta["resourceVersion"].(string); rv != "" && rv != strconv.FormatUint(cur.rv, 10) {
		return nil, apierrors.NewConflict(gr, req.name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	out := merge(res, req.sub, cur, in)
	if gr == secretsGR {
		stringData(out)
	}
	if c := canonical(out, cur.rv); c != nil && reflect.DeepEqual(c, cur.obj) {
		return cur, nil
	}
	m := metadata(out)
	if _, deleting := m["deletionTimestamp"]; deleting {
		if fs, _ := m["finalizers"].([]any); len(fs) == 0 {
			s.removeLocked(gr, cur)
			return cur, nil
		}
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	if gr == crdsGR && req.sub == "" {
		if crd, err = establish(out); err != nil {
			return nil, err
		}
	}
	o, err := s.store.put(gr, out, watch.Modified)
	if err == nil && crd != nil {
		s.reg.addCRD(crd)
	}
	return o, err
}

// merge is the object an update of sub stores: the main resource keeps
// the stored status (when it has a status subresource) and the fields the
// server owns; a status update changes only the status; an approval only
// the conditions.
func merge(res *resource, sub string, cur *object, in map[string]any) map[string]any {
	out := cur.copyObj()
	switch sub {
	case "status":
		setOrDelete(out, "status", in["status"])
		return out
	case "approval":
		st, _ := out["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		inSt, _ := in["status"].(map[string]any)
		setOrDelete(st, "conditions", inSt["conditions"])
		out["status"] = st
		return out
	}
	curMeta := metadata(out)
	if res.status {
		setOrDelete(in, "status", out["status"])
	}
	meta := metadata(in)
	for _, k := range []string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "name", "generation"} {
		setOrDelete(meta, k, curMeta[k])
	}
	in["apiVersion"], in["kind"] = out["apiVersion"], out["kind"]
	if tracksGeneration(res) && !reflect.DeepEqual(withoutMeta(res, canonical(in, cur.rv)), withoutMeta(res, cur.obj)) {
		gen, _ := curMeta["generation"].(json.Number)
		g, _ := gen.Int64()
		meta["generation"] = g + 1
	}
	return in
}

func setOrDelete(m map[string]any, k string, v any) {
	if v == nil {
		delete(m, k)
		return
	}
	m[k] = v
}

// canonical is obj as it would be stored at version rv (nil if it cannot
// be encoded).
func canonical(obj map[string]any, rv uint64) map[string]any {
	o, err := newObject(obj, rv)
	if err != nil {
		return nil
	}
	return o.obj
}

// withoutMeta is what changes an object's generation: all but metadata and
// (with a status subresource) status.
func withoutMeta(res *resource, obj map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		if k != "metadata" && (k != "status" || !res.status) {
			out[k] = v
		}
	}
	return out
}

// patch applies a merge or strategic merge patch, then stores the result
// as an update of the request's subresource.
func (s *Server) patch(r *http.Request, req *apiRequest) (*object, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return s.updateObject(req, func(cur *object) (map[string]any, error) {
		switch mt {
		case "application/merge-patch+json":
			p, err := decodeJSON(body)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			out, _ := mergePatch(cur.copyObj(), p).(map[string]any)
			return out, nil
		case "application/strategic-merge-patch+json":
			if !req.res.typed {
				return nil, unsupported(mt)
			}
			typed, err := s.scheme.New(req.res.gvk())
			if err != nil {
				return nil, unsupported(mt)
			}
			data, err := strategicpatch.StrategicMergePatch(cur.raw, body, typed)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return decodeJSON(data)
		}
		return nil, unsupported(mt)
	})
}

// mergePatch applies a JSON merge patch (RFC 7386) to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// deleteObject deletes an object, or marks it deleted while it has
// finalizers; deleted tells which.
func (s *Server) deleteObject(req *apiRequest) (o *object, deleted bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gr := req.res.gvr.GroupResource()
	cur := s.store.get(gr, req.namespace, req.name)
	if cur == nil {
		return nil, false, apierrors.NewNotFound(gr, req.name)
	}
	meta := metadata(cur.obj)
	if fs, _ := meta["finalizers"].([]any); len(fs) > 0 {
		if _, ok := meta["deletionTimestamp"]; ok {
			return cur, false, nil
		}
		out := cur.copyObj()
		m := metadata(out)
		m["deletionTimestamp"], m["deletionGracePeriodSeconds"] = time.Now().UTC().Format(time.RFC3339), 0
		o, err := s.store.put(gr, out, watch.Modified)
		return o, false, err
	}
	s.removeLocked(gr, cur)
	return cur, true, nil
}

// removeLocked removes an object; a namespace takes its objects along, a
// CRD its resources and their objects.
func (s *Server) removeLocked(gr schema.GroupResource, o *object) {
	switch gr {
	case namespacesGR:
		for g, objs := range s.store.objects {
			for k, child := range objs {
				if k.namespace == o.name {
					s.store.remove(g, child)
				}
			}
		}
	case crdsGR:
		var crd apiextensionsv1.CustomResourceDefinition
		if json.Unmarshal(o.raw, &crd) == nil {
			s.reg.removeCRD(crd.Name)
			cr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
			for _, child := range s.store.list(cr, "") {
				s.store.remove(cr, child)
			}
		}
	}
	s.store.remove(gr, o)
}

// selectors parses a list or watch's label and field selectors; fields
// are metadata.name and metadata.namespace.
func selectors(r *http.Request) (labels.Selector, fields.Selector, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	for _, req := range fs.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return ls, fs, nil
}

func matches(o *object, ls labels.Selector, fs fields.Selector) bool {
	return ls.Matches(o.labels) && fs.Matches(fields.Set{"metadata.name": o.name, "metadata.namespace": o.namespace})
}

// list writes the matching objects with the store's resource version.
func (s *Server) list(w http.ResponseWriter, r *http.Request, req *apiRequest) {
	ls, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.mu.RLock()
	objs := s.store.list(req.res.gvr.GroupResource(), req.namespace)
	rv := s.store.rv
	s.mu.RUnlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`, req.res.listKind, req.res.gvr.GroupVersion().String(), rv)
	n := 0
	for _, o := range objs {
		if !matches(o, ls, fs) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(s.encode(o, req.res))
		n++
	}
	b.WriteString("]}")
	writeRaw(w, http.StatusOK, b.Bytes())
}

// subscribe starts a watch: the events before it (the current objects,
// or those after resource version rv) and the subscription to those after
// version at.
func (s *Server) subscribe(req *apiRequest, rv string, initialEvents bool) (backlog []event, sub *watcher, at uint64, err error) {
	gr := req.res.gvr.GroupResource()
	s.mu.Lock()
	defer s.mu.Unlock()
	if initialEvents || rv == "" || rv == "0" {
		for _, o := range s.store.list(gr, req.namespace) {
			backlog = append(backlog, event{typ: watch.Added, gr: gr, obj: o})
		}
	} else {
		from, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, nil, 0, apierrors.NewBadRequest("bad resourceVersion " + rv)
		}
		var ok bool
		if backlog, ok = s.store.since(gr, from); !ok {
			return nil, nil, 0, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.store.rv))
		}
	}
	return backlog, s.store.subscribe(gr), s.store.rv, nil
}

// watch streams changes: from the request's resource version, or the
// current objects first ("" or "0", or sendInitialEvents with the
// bookmark that ends them).
func (s *Server) watch(w http.ResponseWriter, r *http.Request, req *apiRequest) {
	ls, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	timeout := 30 * time.Minute
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	initialEvents := q.Get("sendInitialEvents") == "true"
	backlog, sub, at, err := s.subscribe(req, q.Get("resourceVersion"), initialEvents)
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() {
		s.mu.Lock()
		s.store.unsubscribe(sub)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the client waits for the headers
	}
	send := func(typ watch.EventType, raw []byte) bool {
		data, err := json.Marshal(watchEvent{Type: typ, Object: raw})
		if err != nil {
			return false
		}
		if _, err := w.Write(append(data, '\n')); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	visible := func(e event) bool {
		return (req.namespace == "" || e.obj.namespace == req.namespace) && matches(e.obj, ls, fs)
	}
	for _, e := range backlog {
		if visible(e) && !send(e.typ, s.encode(e.obj, req.res)) {
			return
		}
	}
	if initialEvents {
		bookmark, _ := json.Marshal(map[string]any{"kind": req.res.kind, "apiVersion": req.res.gvr.GroupVersion().String(),
			"metadata": map[string]any{"resourceVersion": strconv.FormatUint(at, 10), "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		if !send(watch.Bookmark, bookmark) {
			return
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-sub.ch:
			if !ok {
				return
			}
			if visible(e) && !send(e.typ, s.encode(e.obj, req.res)) {
				return
			}
		case <-r.Context().Done():
			return
		case <-timer.C:
			return
		case <-s.done:
			return
		}
	}
}
