// Package hostenginetest runs the host engine against simulated machines
// for tests outside its own packages (the end-to-end tests of
// test/e2e/hostengine): an engine in its own manager on an envtest hub, a
// lab of simulated machines that network-boot from it, BareMetalHosts for
// them, an OS image server, and the check that the BMC password leaks
// nowhere.
package hostenginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/serving"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
)

// Canary is the BMC password of every lab; it must never appear in logs,
// Events or status. 16 bytes: IPMI 1.5 passwords, and ipmi_sim, stop there.
const Canary = "Canary-BMC-Pa55x"

// macOctets gives every lab its own MAC addresses: hosts of earlier tests
// stay in envtest (it has no namespace controller) and share the
// provisioning network's boot server.
var macOctets atomic.Uint32

// NextMACOctet is the MAC octet of a new lab (sim.LabOptions.MACOctet),
// unique in the process (up to 255 labs; then they wrap around).
func NextMACOctet() byte { return byte(macOctets.Add(1) & 0xff) }

// Engine is a host engine running in its own manager, as on a hub.
type Engine struct {
	// DeployURL is the deploy server's URL (http://Addr unless the
	// options set another).
	DeployURL string
	// Key is the engine's signing key.
	Key []byte
	// Addr is where the deploy server listens.
	Addr string
	// Logs holds everything the engine logged.
	Logs *LogBuffer
	// Stop stops the manager and waits for it; it runs at the test's end
	// too.
	Stop func()
}

// LogBuffer collects an engine's log lines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) write(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.WriteString(s)
}

// String returns what was logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// ControllerConfig is the managers' controller configuration
// (component.ControllerConfig), letting each test start its own engine
// with the same controller names.
func ControllerConfig() config.Controller {
	c := component.ControllerConfig()
	c.SkipNameValidation = ptr.To(true)
	return c
}

// StartEngine starts a manager with the host engine on env's API server.
// The deploy server listens on a listener of its own when addr is empty,
// else on addr (a restarted engine: addr must then be reserved,
// testenv.ReservedAddr, so that nothing takes it while no engine listens); key (a new one when nil) and logs are reused when set (a
// restarted engine). edits change the engine's options last.
func StartEngine(t *testing.T, env *testenv.Env, addr string, key []byte, logs *LogBuffer, edits ...func(*hostengine.Options)) *Engine {
	t.Helper()
	opts := hostengine.Options{DeployListenAddr: addr, BackoffBase: 200 * time.Millisecond, PowerPollInterval: time.Second,
		BMCEgress: egress.Policy{AllowLoopback: true}} // the labs' BMCs listen on loopback
	if addr == "" {
		ln := testenv.Listen(t)
		opts.DeployListener, addr = ln, ln.Addr().String()
	}
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	opts.SigningKey = key
	if logs == nil {
		logs = &LogBuffer{}
	}
	logger := funcr.New(func(prefix, args string) { logs.write(prefix + " " + args + "\n") }, funcr.Options{Verbosity: 5})
	scheme, err := component.NewScheme(hostengine.Component())
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ControllerConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	for _, edit := range edits {
		edit(&opts)
	}
	if err := hostengine.Setup(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// No reconcile waits for a BMC (operations return Dirty and are
		// requeued), so a manager that misses its graceful shutdown period
		// is a bug: the test fails, with the stacks left.
		if err := mgr.Start(ctx); err != nil {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Errorf("manager: %v\n%s", err, metalshiftStacks(buf.String()))
		}
	}()
	e := &Engine{DeployURL: "http://" + addr, Key: key, Addr: addr, Logs: logs}
	var once sync.Once
	e.Stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(e.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			out := logs.String()
			if len(out) > 6000 {
				out = out[len(out)-6000:]
			}
			t.Logf("engine log tail:\n%s", out)
		}
	})
	return e
}

// StartLab serves n simulated machines whose network boot server is the
// engine.
func StartLab(t *testing.T, e *Engine, n int) *sim.Lab {
	t.Helper()
	lab := sim.NewLab(sim.LabOptions{Hosts: n, Password: Canary, BootURL: e.DeployURL, AgentPollInterval: 100 * time.Millisecond, DiskSizeBytes: 64 << 30,
		MACOctet: NextMACOctet()})
	if err := lab.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lab.Close)
	return lab
}

// ImageServer serves a random raw image and counts downloads.
type ImageServer struct {
	*httptest.Server
	// Data is the image.
	Data []byte
	// SHA256 is the image's checksum, in hex.
	SHA256 string
	// Downloads counts the requests.
	Downloads atomic.Int32
	// Gate, when set, holds downloads until closed.
	Gate chan struct{}
}

// NewImageServer serves a random image of size bytes; gated holds its
// downloads until Gate is closed.
func NewImageServer(t testing.TB, size int, gated bool) *ImageServer {
	t.Helper()
	s := &ImageServer{Data: make([]byte, size)}
	_, _ = rand.Read(s.Data)
	sum := sha256.Sum256(s.Data)
	s.SHA256 = hex.EncodeToString(sum[:])
	if gated {
		s.Gate = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Downloads.Add(1)
		if s.Gate != nil {
			select {
			case <-s.Gate:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(s.Data)
	}))
	t.Cleanup(s.Close)
	return s
}

// Image is a BareMetalHost's spec.image for the served image.
func (s *ImageServer) Image() *metal3v1.Image {
	return &metal3v1.Image{URL: s.URL + "/rhcos.raw", Checksum: s.SHA256, ChecksumType: metal3v1.SHA256}
}

// CreateHost creates the BareMetalHost and BMC Secret of the lab's i-th
// machine in ns, with mutate (when set) applied to the host first.
func CreateHost(t *testing.T, env *testenv.Env, lab *sim.Lab, i int, ns string, virtualMedia bool, mutate func(*metal3v1.BareMetalHost)) *metal3v1.BareMetalHost {
	t.Helper()
	host, secret := lab.Host(lab.Machines[i], ns, virtualMedia)
	if mutate != nil {
		mutate(host)
	}
	g := gomega.NewWithT(t)
	g.Expect(env.Client.Create(context.Background(), secret)).To(gomega.Succeed())
	g.Expect(env.Client.Create(context.Background(), host)).To(gomega.Succeed())
	return host
}

// Get reads host again into host and returns it.
func Get(g gomega.Gomega, env *testenv.Env, host *metal3v1.BareMetalHost) *metal3v1.BareMetalHost {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(host), host)).To(gomega.Succeed())
	return host
}

// WaitState waits up to a minute for host to reach state.
func WaitState(t *testing.T, env *testenv.Env, host *metal3v1.BareMetalHost, state metal3v1.ProvisioningState) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		h := Get(g, env, host)
		g.Expect(h.Status.Provisioning.State).To(gomega.Equal(state), "errorMessage: %s; operationalStatus: %s; powered on: %v; conditions: %v; operation history: %+v",
			h.Status.ErrorMessage, h.Status.OperationalStatus, h.Status.PoweredOn, h.Status.Conditions, h.Status.OperationHistory)
	}, 60*time.Second).Should(gomega.Succeed())
}

// Update applies mutate to the latest host and writes it, again on a
// conflict.
func Update(t *testing.T, env *testenv.Env, host *metal3v1.BareMetalHost, mutate func(*metal3v1.BareMetalHost)) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(host), host); err != nil {
			return err
		}
		mutate(host)
		return env.Client.Update(context.Background(), host)
	}).Should(gomega.Succeed())
}

// UserDataSecret creates a user data Secret and returns its reference.
func UserDataSecret(t *testing.T, env *testenv.Env, ns, name, data string) *corev1.SecretReference {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{"userData": data}}
	gomega.NewWithT(t).Expect(env.Client.Create(context.Background(), s)).To(gomega.Succeed())
	return &corev1.SecretReference{Name: name, Namespace: ns}
}

// ExpectNoCanary checks that the BMC password is in no log line of the
// engine, Event of ns or status of hosts.
func ExpectNoCanary(t *testing.T, env *testenv.Env, e *Engine, ns string, hosts ...*metal3v1.BareMetalHost) {
	t.Helper()
	g := gomega.NewWithT(t)
	g.Expect(e.Logs.String()).NotTo(gomega.ContainSubstring(Canary), "logs")
	evs := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), evs, client.InNamespace(ns))).To(gomega.Succeed())
	for _, ev := range evs.Items {
		g.Expect(ev.Note).NotTo(gomega.ContainSubstring(Canary), "event %s", ev.Reason)
	}
	for _, h := range hosts {
		data, _ := json.Marshal(Get(g, env, h).Status)
		g.Expect(string(data)).NotTo(gomega.ContainSubstring(Canary), "status")
	}
}

// IssueTLS writes a CA and a serving certificate of it for 127.0.0.1 and
// more IPs, and returns the files and the CA's PEM.
func IssueTLS(t *testing.T, more ...string) (serving.TLSFiles, []byte) {
	t.Helper()
	ca, err := certs.NewCA("deploy-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	for _, ip := range more {
		ips = append(ips, net.ParseIP(ip))
	}
	leaf, err := certs.Issue(ca, certs.Spec{CommonName: "deploy-server", IPs: ips, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := serving.TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAFile: filepath.Join(dir, "ca.crt")}
	for path, data := range map[string][]byte{f.CertFile: leaf.Cert, f.KeyFile: leaf.Key, f.CAFile: ca.Cert} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f, ca.Cert
}

// metalshiftStacks keeps the goroutine stacks that run metalshift code.
func metalshiftStacks(dump string) string {
	var keep []string
	for _, g := range strings.Split(dump, "\n\n") {
		// Ours, and the manager's own (a runnable of controller-runtime's
		// or an HTTP server that did not stop has no frame of ours).
		if strings.Contains(g, "metalshift/metalshift/") || strings.Contains(g, "sigs.k8s.io/controller-runtime") || strings.Contains(g, "net/http.(*Server)") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}
