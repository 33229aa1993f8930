package baremetalhost_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/internal/testenv"
	"github.com/metalshift/metalshift/sim"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

// labCounter gives every lab its own MAC addresses: hosts of earlier
// tests stay in envtest (it has no namespace controller) and share the
// provisioning network's boot server.
var labCounter atomic.Int32

// canary is the BMC password of every lab; it must never appear in logs,
// Events or status.
const canary = "Canary-BMC-Pa55x" // 16 bytes: IPMI 1.5 passwords, and ipmi_sim, stop there

// engine is a host engine running in its own manager, as on a hub.
type engine struct {
	deployURL string
	key       []byte
	addr      string
	logs      *logBuffer
	stop      func()
}

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startEngine starts a manager with the host engine; addr and key are
// reused when set (a restarted engine: addr must then be reserved,
// testenv.ReservedAddr, so that nothing takes it while no engine listens).
// Without addr the deploy server takes a listener of its own.
func startEngine(t *testing.T, addr string, key []byte, logs *logBuffer, edits ...func(*hostengine.Options)) *engine {
	t.Helper()
	var ln net.Listener
	if addr == "" {
		ln = testenv.Listen(t)
		addr = ln.Addr().String()
	}
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	if logs == nil {
		logs = &logBuffer{}
	}
	logger := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.buf.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 5})
	scheme, err := component.NewScheme(hostengine.Component())
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlConfigSkipNameValidation(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	opts := hostengine.Options{DeployListenAddr: addr, DeployListener: ln, SigningKey: key, BackoffBase: 200 * time.Millisecond, PowerPollInterval: time.Second,
		BMCEgress: egress.Policy{AllowLoopback: true}} // the labs' BMCs listen on loopback
	for _, edit := range edits {
		edit(&opts)
	}
	if err := hostengine.Setup(ctx, mgr, opts); err != nil {
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
	e := &engine{deployURL: "http://" + addr, key: key, addr: addr, logs: logs}
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(e.stop)
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

// startLab serves n simulated machines whose network boot server is the engine.
func startLab(t *testing.T, e *engine, n int) *sim.Lab {
	t.Helper()
	lab := sim.NewLab(sim.LabOptions{Hosts: n, Password: canary, BootURL: e.deployURL, AgentPollInterval: 100 * time.Millisecond, DiskSizeBytes: 64 << 30,
		MACOctet: byte(labCounter.Add(1))})
	if err := lab.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lab.Close)
	return lab
}

// imageServer serves a random raw image and counts downloads.
type imageServer struct {
	*httptest.Server
	data      []byte
	sha256    string
	downloads atomic.Int32
	// gate, when set, holds downloads until closed.
	gate chan struct{}
}

func newImageServer(t testing.TB, size int, gated bool) *imageServer {
	t.Helper()
	s := &imageServer{data: make([]byte, size)}
	_, _ = rand.Read(s.data)
	sum := sha256.Sum256(s.data)
	s.sha256 = hex.EncodeToString(sum[:])
	if gated {
		s.gate = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.downloads.Add(1)
		if s.gate != nil {
			select {
			case <-s.gate:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(s.data)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *imageServer) image() *metal3v1.Image {
	return &metal3v1.Image{URL: s.URL + "/rhcos.raw", Checksum: s.sha256, ChecksumType: metal3v1.SHA256}
}

func createHost(t *testing.T, lab *sim.Lab, i int, ns string, virtualMedia bool, mutate func(*metal3v1.BareMetalHost)) *metal3v1.BareMetalHost {
	t.Helper()
	host, secret := lab.Host(lab.Machines[i], ns, virtualMedia)
	if mutate != nil {
		mutate(host)
	}
	g := NewWithT(t)
	g.Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), host)).To(Succeed())
	return host
}

func get(g Gomega, host *metal3v1.BareMetalHost) *metal3v1.BareMetalHost {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(host), host)).To(Succeed())
	return host
}

func waitState(t *testing.T, host *metal3v1.BareMetalHost, state metal3v1.ProvisioningState) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(get(g, host).Status.Provisioning.State).To(Equal(state), "errorMessage: %s", host.Status.ErrorMessage)
	}, 60*time.Second).Should(Succeed())
}

func update(t *testing.T, host *metal3v1.BareMetalHost, mutate func(*metal3v1.BareMetalHost)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(host), host); err != nil {
			return err
		}
		mutate(host)
		return env.Client.Update(context.Background(), host)
	}).Should(Succeed())
}

func userDataSecret(t *testing.T, ns, name, data string) *corev1.SecretReference {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{"userData": data}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), s)).To(Succeed())
	return &corev1.SecretReference{Name: name, Namespace: ns}
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
