package localcp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configure a hub.
type Options struct {
	// Dir holds all of the hub's state; created when missing.
	Dir string

	// BinDir is where etcd, kube-apiserver and kube-controller-manager are;
	// empty means the default search (see findBinary).
	BinDir string

	// Progress receives one line per step; nil discards them.
	Progress io.Writer

	// StartTimeout bounds the start of each child; 0 means 2 minutes.
	StartTimeout time.Duration

	// CRDs are installed (or updated) on every start: those of the hub's
	// components (component.CRDs). Those with more than one version get
	// their conversion webhook pointed at the hub's webhook port.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// ServiceProxySocket, when set, is the Unix socket of an HTTP CONNECT
	// proxy through which kube-apiserver reaches Services (webhooks and
	// conversion webhooks named by a Service): what the pod network and
	// kube-proxy are on a real cluster. It is asked for
	// "<cluster IP>:<port>". kube-apiserver's other traffic to the cluster
	// goes through it too: to kubelets (logs, exec) and aggregated APIs.
	// Empty: Services are reached directly, that is not at all, since
	// nothing routes the service network.
	ServiceProxySocket string

	// HostAddresses are the addresses (IPs or DNS names) at which machines
	// reach the hub's servers besides loopback (10.0.2.2 for QEMU VMs):
	// the certificates of the deploy server, the agent service and the
	// ignition server name them.
	HostAddresses []string

	// Controllers are kube-controller-manager controllers to run besides
	// the hub's own (kubeControllerManagerControllers): the workload
	// controllers ("deployment-controller", "replicaset-controller",
	// "endpointslice-controller", "node-lifecycle-controller") for a hub
	// whose Deployments real nodes run.
	Controllers []string
}

// Hub is a running local control plane.
type Hub struct {
	opts  Options
	dir   string
	pki   pki
	ports Ports
	// releasePorts gives up the reservations of ports once nothing
	// listens on them any more.
	releasePorts func()
	lock         *os.File
	procs        []*process // in start order

	restConfig *rest.Config
}

// DefaultDir is where a hub keeps its state when no directory is given:
// $XDG_STATE_HOME/metalshift/hub, else ~/.local/state/metalshift/hub.
func DefaultDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(os.TempDir(), "metalshift-hub")
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "metalshift", "hub")
}

// KubeconfigPath is the admin kubeconfig of the hub in dir.
func KubeconfigPath(dir string) string { return filepath.Join(dir, "kubeconfig") }

// CAPath is the CA certificate (PEM) of the hub in dir, which signs the
// certificates of the servers machines reach.
func CAPath(dir string) string { return filepath.Join(dir, "pki", "ca.crt") }

// Start brings up the control plane in opts.Dir, resuming with the data of
// an earlier run, and installs opts.CRDs. It fails with ErrAlreadyRunning
// when a hub already runs in that directory. On error nothing is left
// running.
func Start(ctx context.Context, opts Options) (_ *Hub, reterr error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir()
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	h := &Hub{opts: opts, dir: dir}
	if h.lock, err = lock(dir, startLockPatience); err != nil {
		if errors.Is(err, ErrAlreadyRunning) {
			return nil, alreadyRunningError(dir)
		}
		return nil, err
	}
	defer func() {
		if reterr != nil {
			h.Stop()
		}
	}()
	for _, d := range []string{h.runDir(), h.logDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := reapStale(h.runDir(), dir); err != nil {
		return nil, err
	}
	prev, _ := ReadState(dir)
	if h.ports, h.releasePorts, err = reservePorts(prev.Ports); err != nil {
		return nil, err
	}
	if err := h.setPhase(PhaseStarting); err != nil {
		return nil, err
	}
	if h.pki, err = ensurePKI(dir, opts.HostAddresses...); err != nil {
		return nil, fmt.Errorf("creating certificates: %w", err)
	}
	if err := h.startChildren(ctx); err != nil {
		return nil, err
	}
	if err := InstallCRDs(ctx, h.restConfig, opts.CRDs, h.WebhookURL(), h.CABundle()); err != nil {
		return nil, err
	}
	h.progress("Installed the CRDs")
	return h, nil
}

func alreadyRunningError(dir string) error {
	msg := fmt.Sprintf("%v: %s", ErrAlreadyRunning, dir)
	if s, err := ReadState(dir); err == nil && s.PID != 0 {
		msg += fmt.Sprintf(" (pid %d, %s)", s.PID, s.Server)
	}
	return fmt.Errorf("%s; use it with `kubectl --kubeconfig %s`, or stop it with `metalshift hub down --dir %s`: %w",
		msg, KubeconfigPath(dir), dir, ErrAlreadyRunning)
}

func (h *Hub) startChildren(ctx context.Context) error {
	etcd, err := h.etcd()
	if err != nil {
		return err
	}
	if err := h.run(ctx, etcd, h.etcdHealthy); err != nil {
		return err
	}
	apiserver, err := h.apiserver()
	if err != nil {
		return err
	}
	if err := h.run(ctx, apiserver, h.apiserverReady); err != nil {
		return err
	}
	if err := h.writeKubeconfigs(); err != nil {
		return err
	}
	kcm, err := h.controllerManager()
	if err != nil {
		return err
	}
	return h.run(ctx, kcm, h.controllerManagerHealthy)
}

// run starts p and waits until ready succeeds, p exits, or the start
// timeout passes.
func (h *Hub) run(ctx context.Context, p *process, ready func(context.Context) error) error {
	start := time.Now()
	if err := p.start(); err != nil {
		return err
	}
	h.procs = append(h.procs, p)
	if err := waitReady(ctx, p, ready, h.opts.StartTimeout); err != nil {
		return err
	}
	h.progress("Started %s in %s", p.name, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// Stop stops the children in reverse start order, records the hub as
// stopped and releases the directory. It is safe to call more than once.
func (h *Hub) Stop() {
	for i := len(h.procs) - 1; i >= 0; i-- {
		h.procs[i].stop()
	}
	h.procs = nil
	if h.releasePorts != nil {
		h.releasePorts()
		h.releasePorts = nil
	}
	if h.lock != nil {
		_ = writeState(h.dir, State{Phase: PhaseStopped, Ports: h.ports})
		h.lock.Close()
		h.lock = nil
	}
}

// Exited returns a channel that gets the error of the first child to exit
// on its own; the hub cannot serve without it.
func (h *Hub) Exited() <-chan error {
	ch := make(chan error, 1)
	for _, p := range h.procs {
		go func() {
			<-p.done
			ch <- fmt.Errorf("%s exited (%v); see %s", p.name, p.err, p.logPath)
		}()
	}
	return ch
}

// MarkReady records that the hub serves, with its manager running.
func (h *Hub) MarkReady() error { return h.setPhase(PhaseReady) }

func (h *Hub) setPhase(phase string) error {
	return writeState(h.dir, State{PID: os.Getpid(), Phase: phase, Ports: h.ports, Server: h.Server()})
}

// Dir is the hub's state directory.
func (h *Hub) Dir() string { return h.dir }

// Server is the URL of the hub's kube-apiserver.
func (h *Hub) Server() string { return "https://127.0.0.1:" + strconv.Itoa(h.ports.APIServer) }

// RESTConfig returns an admin client configuration for the hub.
func (h *Hub) RESTConfig() *rest.Config { return rest.CopyConfig(h.restConfig) }

// Kubeconfig is the path of the hub's admin kubeconfig.
func (h *Hub) Kubeconfig() string { return KubeconfigPath(h.dir) }

// WebhookServing is where the manager must serve the hub's webhooks.
type WebhookServing struct {
	Host, CertDir, CertName, KeyName string
	Port                             int
}

// WebhookServing returns where the manager must serve the hub's webhooks.
func (h *Hub) WebhookServing() WebhookServing {
	return WebhookServing{
		Host: "127.0.0.1", Port: h.ports.Webhook,
		CertDir: h.pki.dir, CertName: "webhook.crt", KeyName: "webhook.key",
	}
}

// WebhookURL is the base URL at which the kube-apiserver calls the webhooks.
func (h *Hub) WebhookURL() string { return "https://127.0.0.1:" + strconv.Itoa(h.ports.Webhook) }

// CAFile is the path of the hub CA's certificate (PEM).
func (h *Hub) CAFile() string { return h.pki.cert("ca") }

// CABundle is the PEM of the hub CA.
func (h *Hub) CABundle() []byte {
	data, _ := os.ReadFile(h.pki.cert("ca"))
	return data
}

// DeployAddr is where the host engine's deploy server listens.
func (h *Hub) DeployAddr() string { return "127.0.0.1:" + strconv.Itoa(h.ports.Deploy) }

// DeployURL is how (simulated) hosts reach the deploy server (https, its
// certificate from the hub CA: ServingCert(DeployServerCert)).
func (h *Hub) DeployURL() string { return "https://" + h.DeployAddr() }

// DeployBootAddr is where the deploy server serves plain http to
// network-booting firmware that cannot verify it (iPXE).
func (h *Hub) DeployBootAddr() string { return "127.0.0.1:" + strconv.Itoa(h.ports.DeployBoot) }

// ServingCert returns the certificate and key files of a server machines
// reach (DeployServerCert, AgentServiceCert, IgnitionServerCert), issued
// by the hub CA for loopback and Options.HostAddresses, or of the console
// (ConsoleCert), for loopback.
func (h *Hub) ServingCert(name string) (certFile, keyFile string) {
	return h.pki.cert(name), h.pki.key(name)
}

// AgentServiceAddr is where the agent service (the agent-based install's
// discovery images and REST API) listens.
func (h *Hub) AgentServiceAddr() string { return "127.0.0.1:" + strconv.Itoa(h.ports.AgentService) }

// ConsoleAddr is where the web console listens (https, certificate
// ConsoleCert from the hub CA).
func (h *Hub) ConsoleAddr() string { return "127.0.0.1:" + strconv.Itoa(h.ports.Console) }

// IgnitionServing is where the bootstrap provider's ignition server
// listens (https, certificate from the hub CA).
type IgnitionServing struct {
	Addr, URL, CertFile, KeyFile string
}

// IgnitionServing returns where the ignition server must listen.
func (h *Hub) IgnitionServing() IgnitionServing {
	addr := "127.0.0.1:" + strconv.Itoa(h.ports.Ignition)
	return IgnitionServing{Addr: addr, URL: "https://" + addr, CertFile: h.pki.cert(IgnitionServerCert), KeyFile: h.pki.key(IgnitionServerCert)}
}

// SigningKey returns the key that signs deploy URLs and agent tokens,
// created on first start and kept in the directory so that a restarted
// hub honours the tokens of agents still running.
func (h *Hub) SigningKey() ([]byte, error) {
	path := h.SigningKeyFile()
	if data, err := os.ReadFile(path); err == nil && len(data) >= 32 {
		return data, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, os.WriteFile(path, key, 0o600)
}

// SigningKeyFile is where SigningKey keeps the key.
func (h *Hub) SigningKeyFile() string { return filepath.Join(h.pki.dir, "deploy-signing.key") }

// LogDir holds the children's logs.
func (h *Hub) LogDir() string { return h.logDir() }

func (h *Hub) runDir() string { return filepath.Join(h.dir, "run") }
func (h *Hub) logDir() string { return filepath.Join(h.dir, "logs") }

func (h *Hub) progress(format string, args ...any) {
	fmt.Fprintf(h.opts.Progress, format+"\n", args...)
}

// RegisterWebhooks points the hub's admission webhook configurations at the
// manager's webhook server. Call it once the server listens.
func (h *Hub) RegisterWebhooks(ctx context.Context) error {
	return RegisterWebhooks(ctx, h.restConfig, h.WebhookURL(), h.CABundle())
}

// tlsClient returns an HTTP client that trusts the hub CA and presents the
// named client certificate.
func (h *Hub) tlsClient(certName string) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(h.CABundle()) {
		return nil, errors.New("reading the hub CA")
	}
	cert, err := tls.LoadX509KeyPair(h.pki.cert(certName), h.pki.key(certName))
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		}},
	}, nil
}

// GetOK fails unless GET url answers 200 OK; the error carries the start
// of the body (health endpoints say there what is not ready).
func GetOK(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// writeKubeconfigs writes the admin kubeconfig and the controller
// manager's, with the certificates embedded, and builds the admin client
// configuration.
func (h *Hub) writeKubeconfigs() error {
	for _, kc := range []struct{ cert, path string }{
		{"admin", h.Kubeconfig()},
		{"controller-manager", filepath.Join(h.pki.dir, "controller-manager.kubeconfig")},
	} {
		cfg, err := h.kubeconfig(kc.cert)
		if err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*cfg, kc.path); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig())
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	h.restConfig = cfg
	return nil
}

func (h *Hub) kubeconfig(certName string) (*clientcmdapi.Config, error) {
	cert, err := os.ReadFile(h.pki.cert(certName))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(h.pki.key(certName))
	if err != nil {
		return nil, err
	}
	const name = "metalshift-hub"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: h.Server(), CertificateAuthorityData: h.CABundle()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return cfg, nil
}
