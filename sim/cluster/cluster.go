package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/sim/kubeapi"
)

// Ports of an installed cluster on its API VIP.
const (
	APIPort                 = 6443
	MachineConfigServerPort = bootstrapnode.MachineConfigServerPort
)

// bootstrapFiles is what the bootstrap service reads from /opt/openshift.
type bootstrapFiles struct {
	installConfig *installconfig.InstallConfig
	// vip is where the API answers: the install-config's API VIP, or the
	// bootstrapping machine's address when it has none.
	vip             string
	ca              certs.KeyPair
	adminKubeconfig []byte
	release         string
	manifests       map[string][]byte // path → content
}

// Cluster is one installed cluster, running while any of its machines is up.
type Cluster struct {
	w      *World
	name   string
	domain string
	vip    string
	files  bootstrapFiles
	dir    string
	names  []string
	// wildcard is the ingress name, *.apps.<domain>.
	wildcard []string
	kubelet  []byte // the bootstrap kubeconfig the machine-config-server hands to nodes
	// tokenID and tokenSecret are the nodes' bootstrap token.
	tokenID, tokenSecret string

	apiserver *localcp.Child
	// controllerManager runs the cluster's workload controllers when it
	// runs the bare-metal operator.
	controllerManager *localcp.Child
	// inMemory is the API server with InMemoryAPIServer.
	inMemory *kubeapi.Server
	mcs      *http.Server
	client   client.Client
	cancel   context.CancelFunc

	// installed is set once the ClusterVersion is Completed.
	installed atomic.Bool

	// refs counts the machines running it; guarded by the world's mutex.
	refs int
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.name }

// Client is an admin client of the cluster's API.
func (c *Cluster) Client() client.Client { return c.client }

// acquire returns the running cluster at the VIP of f, starting it if it
// is not running; release must follow. Starts are serialized, so two
// bootstrap nodes of one cluster never start it twice.
func (w *World) acquire(ctx context.Context, f bootstrapFiles) (*Cluster, error) {
	w.startMu.Lock()
	defer w.startMu.Unlock()
	vip := f.vip
	if c := w.join(vip); c != nil {
		return c, nil
	}
	c, err := w.start(ctx, f)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c.refs = 1
	w.clusters[vip] = c
	return c, nil
}

// join takes a reference on the running cluster at vip.
func (w *World) join(vip string) *Cluster {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.clusters[vip]
	if c != nil {
		c.refs++
	}
	return c
}

// release drops a reference; the last one stops the cluster.
func (w *World) release(c *Cluster) {
	w.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last && w.clusters[c.vip] == c {
		delete(w.clusters, c.vip)
	}
	w.mu.Unlock()
	if last {
		c.stop()
	}
}

func (w *World) start(ctx context.Context, f bootstrapFiles) (_ *Cluster, reterr error) {
	ic := f.installConfig
	sum := sha256.Sum256(f.ca.Cert)
	c := &Cluster{
		w: w, name: ic.Metadata.Name, domain: ic.ClusterDomain(), vip: f.vip, files: f,
		dir:   filepath.Join(w.dir, ic.Metadata.Name+"-"+hex.EncodeToString(sum[:4])),
		names: []string{ic.APIHost(), ic.APIInternalHost()},
	}
	defer func() {
		if reterr != nil {
			c.stop()
		}
	}()
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	if err := c.writePKI(); err != nil {
		return nil, err
	}
	if err := c.startAPI(ctx); err != nil {
		return nil, err
	}
	w.register(c.names, c.vip)
	// The ingress wildcard, as a user's DNS holds it: the ingress VIP, or
	// the API's address without VIPs (a single node serves both).
	ingress := c.vip
	if vip := ic.IngressVIP(); vip != "" {
		ingress = vip
	}
	c.wildcard = []string{"*.apps." + ic.ClusterDomain()}
	w.register(c.wildcard, ingress)
	if err := c.startMachineConfigServer(); err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := c.installContent(ctx); err != nil {
		return nil, err
	}
	if c.runsOperator() {
		if err := c.startControllerManager(ctx); err != nil {
			return nil, err
		}
		if err := c.installOperator(ctx); err != nil {
			return nil, err
		}
		go c.workloadLoop(loopCtx)
	}
	go c.versionLoop(loopCtx)
	go c.csrLoop(loopCtx)
	w.opts.Logf("Cluster %s: API at https://%s:%d, machine-config-server at https://%s:%d", c.name, c.vip, APIPort, c.vip, MachineConfigServerPort)
	return c, nil
}

// writePKI issues the API and machine-config-server serving certificates,
// the service-account key and the nodes' bootstrap token.
func (c *Cluster) writePKI() error {
	ip := net.ParseIP(c.vip)
	serving, err := certs.Issue(c.files.ca, certs.Spec{
		CommonName: c.names[0], Server: true,
		DNSNames: append([]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"}, c.names...),
		IPs:      []net.IP{ip, net.ParseIP("172.30.0.1")},
	})
	if err != nil {
		return err
	}
	sa, err := certs.NewCA("service-accounts")
	if err != nil {
		return err
	}
	saPub, err := sa.PublicKeyPEM()
	if err != nil {
		return err
	}
	c.tokenID, c.tokenSecret = newBootstrapToken()
	c.kubelet, err = kubeconfig("https://"+net.JoinHostPort(c.names[1], fmt.Sprint(APIPort)), c.files.ca.Cert,
		&clientcmdapi.AuthInfo{Token: c.tokenID + "." + c.tokenSecret})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"ca.crt": c.files.ca.Cert, "serving.crt": serving.Cert, "serving.key": serving.Key, "sa.key": sa.Key, "sa.pub": saPub,
	} {
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startAPI starts the cluster's API server, the kind the world's options
// say, and the admin client of the cluster's own loops.
func (c *Cluster) startAPI(ctx context.Context) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.files.adminKubeconfig)
	if err != nil {
		return fmt.Errorf("the admin kubeconfig: %w", err)
	}
	cfg.Dial = c.w.DialContext
	cfg.Timeout = 5 * time.Second
	switch c.w.opts.APIServer {
	case KubeAPIServer:
		etcdURL, err := c.w.ensureEtcd(ctx)
		if err != nil {
			return err
		}
		if err := c.startAPIServer(ctx, cfg, etcdURL, filepath.Base(c.dir)); err != nil {
			return err
		}
	case InMemoryAPIServer:
		if err := c.startInMemoryAPIServer(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown API server %q", c.w.opts.APIServer)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	_ = configv1.AddToScheme(scheme)
	// The cluster's own operators are not held to client-go's default of
	// 5 requests a second: at that rate one cluster-version sync took
	// seconds, and the installed cluster reported Available that late.
	cfg.QPS = -1
	c.client, err = client.New(cfg, client.Options{Scheme: scheme})
	return err
}

// startInMemoryAPIServer serves the API from this process, with the
// kube-apiserver's serving certificate and client CA.
func (c *Cluster) startInMemoryAPIServer() error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(c.dir, "serving.crt"), filepath.Join(c.dir, "serving.key"))
	if err != nil {
		return err
	}
	s, err := kubeapi.New(kubeapi.Options{Certificate: cert, ClientCA: c.files.ca.Cert, Version: c.files.installConfig.KubernetesVersion()})
	if err != nil {
		return err
	}
	if err := s.Start(net.JoinHostPort(c.vip, fmt.Sprint(APIPort))); err != nil {
		return fmt.Errorf("the in-memory API server: %w", err)
	}
	c.inMemory = s
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context, cfg *rest.Config, etcdURL, prefix string) error {
	p := func(n string) string { return filepath.Join(c.dir, n) }
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	c.apiserver, err = localcp.StartChild(ctx, localcp.ChildOptions{
		Name: "kube-apiserver", BinDir: c.w.opts.BinDir, Dir: c.dir, Env: localcp.APIServerEnv(),
		Args: []string{
			"--etcd-servers=" + etcdURL, "--etcd-prefix=/" + prefix,
			"--bind-address=" + c.vip, "--advertise-address=" + c.vip, "--secure-port=" + fmt.Sprint(APIPort),
			"--tls-cert-file=" + p("serving.crt"), "--tls-private-key-file=" + p("serving.key"),
			"--client-ca-file=" + p("ca.crt"),
			"--service-account-key-file=" + p("sa.pub"), "--service-account-signing-key-file=" + p("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-cluster-ip-range=172.30.0.0/16",
			"--authorization-mode=Node,RBAC", "--enable-bootstrap-token-auth=true", "--enable-priority-and-fairness=false", "--profiling=false",
			"--endpoint-reconciler-type=none", "--v=0",
		},
		Ready: func(ctx context.Context) error {
			return localcp.GetOK(ctx, hc, strings.TrimSuffix(cfg.Host, "/")+"/readyz")
		},
		StopTimeout: 5 * time.Second,
	})
	return err
}

func (c *Cluster) startMachineConfigServer() error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(c.dir, "serving.crt"), filepath.Join(c.dir, "serving.key"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.vip, fmt.Sprint(MachineConfigServerPort)))
	if err != nil {
		return fmt.Errorf("machine-config-server: %w", err)
	}
	c.mcs = &http.Server{
		Handler:           http.HandlerFunc(c.serveConfig),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = c.mcs.ServeTLS(ln, "", "") }()
	return nil
}

// stop stops the cluster's processes; its data stays in etcd under its
// prefix until the world closes.
func (c *Cluster) stop() {
	if c.cancel != nil {
		c.cancel()
	}
	if c.mcs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = c.mcs.Shutdown(ctx)
		cancel()
	}
	c.w.unregister(c.names)
	c.w.unregister(c.wildcard)
	if c.controllerManager != nil {
		c.controllerManager.Stop()
	}
	if c.apiserver != nil {
		c.apiserver.Stop()
	}
	if c.inMemory != nil {
		c.inMemory.Close()
	}
	c.w.opts.Logf("Cluster %s stopped: none of its machines runs", c.name)
}
