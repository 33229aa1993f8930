package kubeapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Options configure a Server.
type Options struct {
	// Certificate is the serving certificate.
	Certificate tls.Certificate
	// ClientCA is the PEM bundle that client certificates must chain to.
	ClientCA []byte
	// Version is the Kubernetes version /version reports, e.g. v1.29.5.
	Version string
}

// Server is one cluster's API, in memory.
type Server struct {
	opts    Options
	tls     *tls.Config
	scheme  *runtime.Scheme
	codecs  serializer.CodecFactory
	started time.Time

	// mu guards the registry and the store.
	mu    sync.RWMutex
	reg   *registry
	store *store

	srv *http.Server
	// done is closed when the server closes: watches end.
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a server holding the namespaces every cluster has.
func New(opts Options) (*Server, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(opts.ClientCA) {
		return nil, errors.New("kubeapi: no certificate in the client CA bundle")
	}
	sc, err := sharedScheme()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts: opts, scheme: sc.scheme, codecs: sc.codecs, started: time.Now(),
		reg: newRegistry(sc.scheme), store: newStore(), done: make(chan struct{}),
		tls: &tls.Config{
			Certificates: []tls.Certificate{opts.Certificate}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool,
			MinVersion: tls.VersionTLS12,
		},
	}
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, "kube-node-lease"} {
		obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}
		if _, err := s.createObject(&apiRequest{res: s.reg.lookup(core("namespaces")), verb: "create"}, obj, &user{}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// schemeAndCodecs are the built-in types every server decodes, read only
// once built.
type schemeAndCodecs struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
}

// sharedScheme is one scheme for every server of the process: built per
// server it was a third of an idle cluster's memory (docs/scale.md).
var sharedScheme = sync.OnceValues(func() (schemeAndCodecs, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return schemeAndCodecs{}, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return schemeAndCodecs{}, err
	}
	return schemeAndCodecs{scheme: scheme, codecs: serializer.NewCodecFactory(scheme)}, nil
})

// Start serves HTTPS on addr (host:port) until Close.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.Serve(ln)
	return nil
}

// Serve serves HTTPS on ln until Close.
func (s *Server) Serve(ln net.Listener) {
	s.srv = &http.Server{Handler: s, TLSConfig: s.tls, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() { _ = s.srv.ServeTLS(ln, "", "") }()
}

// Close ends the watches and stops serving at once, dropping the
// connections (as a machine that powers off does).
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// apiRequest is a resource request, parsed from its path and method.
type apiRequest struct {
	res       *resource
	namespace string
	name      string
	sub       string
	verb      string
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/livez":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
		return
	case "/version":
		writeJSON(w, http.StatusOK, s.version())
		return
	}
	s.mu.RLock()
	u, ok := s.authenticate(r)
	s.mu.RUnlock()
	if !ok || u == nil {
		writeError(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	if doc := s.discovery(r); doc != nil {
		if r.Method != http.MethodGet {
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
			return
		}
		writeJSON(w, http.StatusOK, doc)
		return
	}
	req, err := s.parse(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if !allowed(u, req) {
		writeError(w, apierrors.NewForbidden(req.res.gvr.GroupResource(), req.name,
			fmt.Errorf("user %q cannot %s resource %q in the simulated cluster", u.name, req.verb, req.res.gvr.Resource)))
		return
	}
	s.serveResource(w, r, req, u)
}

func (s *Server) version() *version.Info {
	v := strings.TrimPrefix(s.opts.Version, "v")
	var major, minor string
	if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	return &version.Info{Major: major, Minor: minor, GitVersion: s.opts.Version, Platform: "linux/amd64"}
}

// discovery returns the discovery document at r's path, or nil.
func (s *Server) discovery(r *http.Request) any {
	p := strings.Trim(r.URL.Path, "/")
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch parts := strings.Split(p, "/"); {
	case p == "":
		// What kube-apiserver lists at its root; Cluster API's cluster
		// cache reads it to tell whether a cluster is reachable.
		return s.rootPaths()
	case p == "api":
		return &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}}
	case p == "api/v1":
		return s.reg.resourceList(schema.GroupVersion{Version: "v1"})
	case p == "apis":
		return s.reg.groups()
	case len(parts) == 2 && parts[0] == "apis":
		if g := s.reg.group(parts[1]); g != nil {
			return g
		}
	case len(parts) == 3 && parts[0] == "apis":
		if l := s.reg.resourceList(schema.GroupVersion{Group: parts[1], Version: parts[2]}); l != nil {
			return l
		}
	}
	return nil
}

// rootPaths lists the paths served, as kube-apiserver does at "/". The
// caller holds s.mu.
func (s *Server) rootPaths() *metav1.RootPaths {
	paths := []string{"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"}
	for _, g := range s.reg.groups().Groups {
		paths = append(paths, "/apis/"+g.Name)
		for _, v := range g.Versions {
			paths = append(paths, "/apis/"+v.GroupVersion)
		}
	}
	sort.Strings(paths)
	return &metav1.RootPaths{Paths: paths}
}

// parse finds the resource, namespace, name and subresource of a request:
// /api/v1/... or /apis/<group>/<version>/..., then
// [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
func (s *Server) parse(r *http.Request) (*apiRequest, error) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 3 && parts[0] == "api" && parts[1] == "v1":
		gv, parts = schema.GroupVersion{Version: "v1"}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return nil, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	req := &apiRequest{}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		if res := s.reg.lookup(gv.WithResource(parts[2])); res != nil && res.namespaced {
			req.namespace, parts = parts[1], parts[2:]
		}
	}
	if len(parts) > 3 {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path)
	}
	req.res = s.reg.lookup(gv.WithResource(parts[0]))
	if req.res == nil {
		return nil, apierrors.NewNotFound(gv.WithResource(parts[0]).GroupResource(), "")
	}
	if len(parts) > 1 {
		req.name = parts[1]
	}
	if len(parts) > 2 {
		req.sub = parts[2]
		if (req.sub != "status" || !req.res.status) && (req.sub != "approval" || !req.res.approval) {
			return nil, apierrors.NewNotFound(req.res.gvr.GroupResource(), req.name+"/"+req.sub)
		}
	}
	if req.res.namespaced && req.namespace == "" && req.name != "" {
		return nil, apierrors.NewBadRequest("a namespaced resource is addressed under namespaces/<namespace>/")
	}
	var err error
	if req.verb, err = verb(r, req); err != nil {
		return nil, err
	}
	return req, nil
}

// verb is the Kubernetes verb of a request.
func verb(r *http.Request, req *apiRequest) (string, error) {
	named := req.name != ""
	switch {
	case r.Method == http.MethodGet && named:
		return "get", nil
	case r.Method == http.MethodGet && (r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"):
		return "watch", nil
	case r.Method == http.MethodGet:
		return "list", nil
	case r.Method == http.MethodPost && !named:
		return "create", nil
	case r.Method == http.MethodPut && named:
		return "update", nil
	case r.Method == http.MethodPatch && named:
		return "patch", nil
	case r.Method == http.MethodDelete && named:
		return "delete", nil
	}
	return "", apierrors.NewMethodNotSupported(req.res.gvr.GroupResource(), r.Method)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code, data = http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	writeRaw(w, code, data)
}

func writeRaw(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeError writes err as a Status, as kube-apiserver does.
func writeError(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, &status)
}

// watchEvent is a watch stream's frame.
type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}
