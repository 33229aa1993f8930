package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metalshift/metalshift/internal/ports"
	"github.com/metalshift/metalshift/localcp"
)

// Options configure a World.
type Options struct {
	// Dir holds etcd's data and the clusters' files; a temporary directory when empty.
	Dir string
	// BinDir is where etcd and kube-apiserver are (default search as the hub's).
	BinDir string
	// Logf receives what the simulated machines and clusters print.
	Logf func(format string, args ...any)
	// APIServer is what serves each installed cluster's API; the default
	// is a real kube-apiserver.
	APIServer APIServer
	// Runtime runs the containers of the images it knows on the installed
	// clusters' nodes, the bare-metal operator's among them; with it, each
	// cluster (with a kube-apiserver) gets the operator's manifests, as a
	// release payload carries them, and its baremetal ClusterOperator is
	// the operator's. Without it, or with InMemoryAPIServer, that
	// ClusterOperator is simulated like the others.
	Runtime Runtime
	// Hosts are extra records of the simulated DNS, name → IP: the names
	// of the hub's servers the machines reach (an ignition server's DNS
	// name, which its certificate carries), as a site's DNS would hold them.
	Hosts map[string]string
}

// APIServer is the kind of API server an installed cluster runs.
type APIServer string

const (
	// KubeAPIServer runs a kube-apiserver process per cluster, all sharing
	// one etcd (the "light" fidelity level).
	KubeAPIServer APIServer = ""
	// InMemoryAPIServer serves each cluster's API from this process
	// (sim/kubeapi), at the same address with the same certificates and
	// credentials: the "fleet" fidelity level, for scale benchmarks,
	// where hundreds of kube-apiservers would not fit.
	InMemoryAPIServer APIServer = "in-memory"
)

// World is the simulated network the machines live in: a DNS, one etcd
// shared by every installed cluster, and the clusters.
type World struct {
	opts Options
	dir  string
	tmp  bool

	// startMu serializes cluster starts (acquire).
	startMu sync.Mutex

	mu      sync.Mutex
	dns     map[string]string // host name → IP
	etcd    *localcp.Child
	etcdURL string
	// etcdPorts are etcd's reserved ports, released once it stopped.
	etcdPorts []*ports.Reservation
	clusters  map[string]*Cluster // by API VIP
	closed    bool
}

// New returns an empty world; etcd starts with the first cluster.
func New(opts Options) (*World, error) {
	w := &World{opts: opts, dns: map[string]string{}, clusters: map[string]*Cluster{}}
	for name, ip := range opts.Hosts {
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("host %s: %q is not an IP address", name, ip)
		}
		w.dns[name] = ip
	}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "metalshift-sim-")
		if err != nil {
			return nil, err
		}
		w.dir, w.tmp = d, true
	} else {
		w.dir = opts.Dir
		if err := os.MkdirAll(w.dir, 0o700); err != nil {
			return nil, err
		}
	}
	if w.opts.Logf == nil {
		w.opts.Logf = func(string, ...any) {}
	}
	return w, nil
}

// Close stops every cluster and etcd.
func (w *World) Close() {
	w.mu.Lock()
	w.closed = true
	cls := make([]*Cluster, 0, len(w.clusters))
	for _, c := range w.clusters {
		cls = append(cls, c)
	}
	w.mu.Unlock()
	for _, c := range cls {
		c.stop()
	}
	w.mu.Lock()
	if w.etcd != nil {
		w.etcd.Stop()
		w.etcd = nil
	}
	for _, r := range w.etcdPorts {
		r.Release()
	}
	w.etcdPorts = nil
	w.mu.Unlock()
	if w.tmp {
		_ = os.RemoveAll(w.dir)
	}
}

// Cluster returns the running cluster whose API VIP is vip, or nil.
func (w *World) Cluster(vip string) *Cluster {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.clusters[vip]
}

// Resolve maps a host name registered in the simulated DNS to its IP; other
// names and IPs are returned unchanged.
func (w *World) Resolve(host string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ip, ok := w.dns[host]; ok {
		return ip
	}
	// A wildcard record answers for the names below its parent.
	if _, parent, ok := strings.Cut(host, "."); ok {
		if ip, ok := w.dns["*."+parent]; ok {
			return ip
		}
	}
	return host
}

// DialContext dials through the simulated DNS.
func (w *World) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip := w.Resolve(host)
	if net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("lookup %s: no such host in the simulated network", host)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
}

// HTTPClient returns a client that resolves through the simulated DNS and
// trusts only the CAs in caPEM (nil: the system's).
func (w *World) HTTPClient(caPEM []byte) (*http.Client, error) {
	tr := &http.Transport{DialContext: w.DialContext, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("no certificate in the CA bundle")
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}

func (w *World) register(names []string, ip string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		w.dns[n] = ip
	}
}

func (w *World) unregister(names []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		delete(w.dns, n)
	}
}

// ensureEtcd starts the shared etcd once.
func (w *World) ensureEtcd(ctx context.Context) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return "", fmt.Errorf("the simulated world is closed")
	}
	if w.etcd != nil {
		return w.etcdURL, nil
	}
	// etcd is told its ports: they are reserved (held until Close) so
	// that nothing else on the machine binds them before it does.
	var reserved [2]*ports.Reservation
	for i := range reserved {
		r, err := ports.Reserve(0)
		if err != nil {
			reserved[0].Release()
			return "", err
		}
		reserved[i] = r
	}
	client, peer := reserved[0].Port, reserved[1].Port
	url := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	hc := &http.Client{Timeout: time.Second}
	etcd, err := localcp.StartChild(ctx, localcp.ChildOptions{
		Name: "etcd", BinDir: w.opts.BinDir, Dir: w.dir, ID: "sim-etcd",
		Args: []string{
			"--name=sim", "--data-dir=" + filepath.Join(w.dir, "etcd"),
			"--listen-client-urls=" + url, "--advertise-client-urls=" + url,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=sim=" + peerURL, "--listen-metrics-urls=",
			"--unsafe-no-fsync", "--log-level=warn",
		},
		Ready: func(ctx context.Context) error { return localcp.GetOK(ctx, hc, url+"/health") },
	})
	if err != nil {
		reserved[0].Release()
		reserved[1].Release()
		return "", err
	}
	w.etcd, w.etcdURL, w.etcdPorts = etcd, url, reserved[:]
	return url, nil
}
