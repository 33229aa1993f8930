package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/config"
	"github.com/metalshift/metalshift/internal/ports"
	"github.com/metalshift/metalshift/localcp"
)

// Options choose what runs in the environment's manager.
type Options struct {
	// Components register the reconcilers (and webhooks) under test.
	Components []component.Component

	// CAPICore also runs the upstream Cluster API core controllers.
	CAPICore bool

	// Clock is the hub's clock (component.Hub.Clock); nil means the real one.
	Clock clock.Clock

	// Metrics serves the manager's metrics endpoint on a free loopback
	// port, at Env.MetricsURL.
	Metrics bool

	// WithoutAdmission plays a hub without metalshift's validating
	// webhooks: they are served but not registered with the API server
	// (defaulting and Cluster API's webhooks are), so that tests show
	// what the controllers alone refuse.
	WithoutAdmission bool
}

// components are the environment's: metalshift's webhooks and Cluster
// API's, which always run (objects are defaulted and validated as on the
// embedded hub), the Cluster API core controllers when asked, and those
// under test; everyType makes every installed type known to the manager and
// the client.
func (o Options) components() []component.Component {
	core := component.CAPIWebhooks
	if o.CAPICore {
		core = component.CAPICore
	}
	return append([]component.Component{hostWebhooks, agentInstallWebhooks, equinixWebhooks, everyType, core}, o.Components...)
}

// Env is a running test environment.
type Env struct {
	// Config is an admin configuration for the kube-apiserver.
	Config *rest.Config
	// Client reads and writes directly, without a cache.
	Client client.Client
	// Manager runs the components; its client is cached.
	Manager ctrl.Manager
	// MetricsURL is the manager's metrics endpoint, with Options.Metrics.
	MetricsURL string

	env    *envtest.Environment
	cancel context.CancelFunc
	done   chan error
	// reserved are the ports of etcd, kube-apiserver, the webhook server
	// and metricsAddr, held until Stop.
	reserved    []*ports.Reservation
	metricsAddr string
}

func (e *Env) releasePorts() {
	for _, r := range e.reserved {
		r.Release()
	}
	e.reserved = nil
}

// Run starts an environment, stores it in *env, runs the package's tests
// and stops it. It returns the exit code for os.Exit.
func Run(m *testing.M, env **Env, opts Options) int {
	// Reconcilers converge in well under a second here; the timeout only
	// bounds how long a broken test takes to fail on a loaded machine.
	gomega.SetDefaultEventuallyTimeout(30 * time.Second)
	gomega.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start starts kube-apiserver and etcd, installs every CRD and webhook, and
// starts a manager with the chosen components.
func Start(opts Options) (*Env, error) {
	logger := zap.New(zap.UseDevMode(true), zap.WriteTo(logOutput), zap.Level(zapLevel()))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	assets, err := binDir()
	if err != nil {
		return nil, err
	}
	// etcd, kube-apiserver and the webhook and metrics servers are told
	// their ports: reserved ones (internal/ports), held until Stop, which
	// nothing else on the machine binds meanwhile (envtest's own picks are
	// free ports released before use).
	e := &Env{}
	var p [5]int
	for i := range p {
		r, err := ports.Reserve(0)
		if err != nil {
			e.releasePorts()
			return nil, err
		}
		e.reserved = append(e.reserved, r)
		p[i] = r.Port
	}
	etcd := &envtest.Etcd{URL: &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0]))}}
	etcd.Configure().Set("listen-peer-urls", "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(p[1])))
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ErrorIfCRDPathMissing: true,
		ControlPlane: envtest.ControlPlane{Etcd: etcd, APIServer: &envtest.APIServer{
			SecureServing: envtest.SecureServing{ListenAddr: envtest.ListenAddr{Address: "127.0.0.1", Port: strconv.Itoa(p[2])}}}},
		WebhookInstallOptions: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1", LocalServingPort: p[3]},
	}
	e.metricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p[4]))
	if e.Config, err = e.env.Start(); err != nil {
		e.releasePorts()
		return nil, fmt.Errorf("starting envtest with the binaries in %s: %w", assets, err)
	}
	if err := e.start(opts); err != nil {
		_ = e.env.Stop()
		e.releasePorts()
		return nil, err
	}
	return e, nil
}

func (e *Env) start(opts Options) error {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	wio := &e.env.WebhookInstallOptions
	webhookURL := fmt.Sprintf("https://%s:%d", wio.LocalServingHost, wio.LocalServingPort)
	crds, err := config.CRDs(config.OwnCRDs, config.CAPICRDs)
	if err != nil {
		return err
	}
	if err := localcp.InstallCRDs(ctx, e.Config, crds, webhookURL, wio.LocalServingCAData); err != nil {
		return err
	}
	components := opts.components()
	scheme, err := component.NewScheme(components...)
	if err != nil {
		return err
	}
	if err := knowsEvery(scheme, crds); err != nil {
		return err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	mgrOpts := component.Options{WebhookHost: wio.LocalServingHost, WebhookPort: wio.LocalServingPort, WebhookCertDir: wio.LocalServingCertDir,
		WorkloadConnectionRetryInterval: 2 * time.Second, Clock: opts.Clock}
	if opts.Metrics {
		mgrOpts.MetricsAddr = e.metricsAddr
		e.MetricsURL = "http://" + mgrOpts.MetricsAddr + "/metrics"
	}
	if e.Manager, err = component.NewManager(ctx, e.Config, "testenv", mgrOpts, components); err != nil {
		return err
	}
	e.done = make(chan error, 1)
	go func() { e.done <- e.Manager.Start(ctx) }()
	started := e.Manager.GetWebhookServer().StartedChecker()
	for started(nil) != nil {
		select {
		case err := <-e.done:
			return fmt.Errorf("manager stopped during start: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := localcp.RegisterWebhooks(ctx, e.Config, webhookURL, wio.LocalServingCAData); err != nil {
		return err
	}
	if opts.WithoutAdmission {
		own := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: localcp.OwnValidatingWebhooks}}
		if err := e.Client.Delete(ctx, own); err != nil {
			return fmt.Errorf("unregistering metalshift's validating webhooks: %w", err)
		}
	}
	if !e.Manager.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("manager caches did not sync")
	}
	return nil
}

// everyType brings every metalshift API group into the environment's
// scheme: the environment installs every CRD of config, whichever
// components run, and tests read and write any of them. (The hub's scheme
// is its components'; this package cannot import their list, package
// manager, which imports the reconcilers whose tests import this one.)
var everyType = component.Component{Name: "every-type", AddToScheme: func(s *kruntime.Scheme) error {
	for _, add := range []func(*kruntime.Scheme) error{
		metal3v1.AddToScheme, infrav1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme, configv1.AddToScheme,
		agentinstallv1.AddToScheme, hiveextv1.AddToScheme, hivev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}, Setup: func(context.Context, *component.Hub) error { return nil }}

// knowsEvery checks that scheme has a Go type for every version of every
// CRD, so that a new API group cannot be installed here but unknown to the
// tests' client.
func knowsEvery(scheme *kruntime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			if v.Served && !scheme.Recognizes(gvk) {
				return fmt.Errorf("no Go type of %s in the test environment's scheme: add its AddToScheme to everyType", gvk)
			}
		}
	}
	return nil
}

// Stop stops the manager, then kube-apiserver and etcd. A manager that
// does not stop within its graceful shutdown period fails the package (its
// Start returns an error then) and one that does not return at all has its
// goroutines printed: what ignores its context is a bug.
func (e *Env) Stop() error {
	defer e.releasePorts()
	e.cancel()
	if e.done == nil {
		return e.env.Stop()
	}
	select {
	case err := <-e.done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv: the manager did not stop cleanly; the goroutines left:")
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			err = fmt.Errorf("the manager did not stop cleanly within its graceful shutdown period: %w", err)
		}
		return errors.Join(err, e.env.Stop())
	case <-time.After(gracefulShutdownTimeout + 10*time.Second):
	}
	fmt.Fprintln(os.Stderr, "testenv: the manager did not return after its graceful shutdown period; its goroutines:")
	_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	return errors.Join(fmt.Errorf("the manager did not stop within its graceful shutdown period (%s)", gracefulShutdownTimeout), e.env.Stop())
}

// gracefulShutdownTimeout is the manager's (controller-runtime's default).
const gracefulShutdownTimeout = 30 * time.Second

// Namespace creates a namespace named after the test, deleted when the
// test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: dnsPrefix(t.Name())}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

func dnsPrefix(name string) string {
	name = strings.ToLower(name)
	b := strings.Builder{}
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.TrimRight(s, "-") + "-"
}

// Listen returns a loopback listener on a port of the kernel's choosing,
// closed when the test ends, for a server the test starts in-process: the
// server takes the listener (the components' Listener options), so no
// one else can bind its port in between.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// ReservedAddr returns a loopback address whose port is reserved for the
// test until it ends (internal/ports), for a server that must be told a
// port: one in another process (which cannot take the test's listener) or
// one that comes back on the same port after a restart.
func ReservedAddr(t testing.TB) string {
	t.Helper()
	r, err := ports.Reserve(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	return r.Addr()
}

// binDir finds the directory with etcd and kube-apiserver:
// $KUBEBUILDER_ASSETS, else bin/ at the root of the repository.
func binDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Join(filepath.Dir(file), "..", "..", "bin")
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			return "", fmt.Errorf("%s is missing from %s: run `make tools`", b, d)
		}
	}
	return filepath.Abs(d)
}

// logOutput is where the logger Start sets goes: stderr, unless
// RedirectLog says otherwise.
var logOutput = &switchWriter{}

// RedirectLog sends the test process's controller log (the hub's webhooks,
// the in-process manager) to w until restore is called: a benchmark's
// report is not mixed with what a loaded API server makes the webhooks log.
func RedirectLog(w io.Writer) (restore func()) {
	logOutput.mu.Lock()
	defer logOutput.mu.Unlock()
	prev := logOutput.w
	logOutput.w = w
	return func() {
		logOutput.mu.Lock()
		defer logOutput.mu.Unlock()
		logOutput.w = prev
	}
}

// switchWriter writes to w, or to stderr when w is nil.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return os.Stderr.Write(p)
	}
	return s.w.Write(p)
}

func zapLevel() zapcore.Level {
	if os.Getenv("TESTENV_VERBOSE") != "" {
		return zapcore.Level(-4)
	}
	return zapcore.ErrorLevel // tests assert on state, not on log lines
}
