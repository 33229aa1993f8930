package ignitionserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secrets is a client.Reader over a few Secrets.
type secrets map[client.ObjectKey]*corev1.Secret

func (s secrets) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	sec, ok := s[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	sec.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (s secrets) List(context.Context, client.ObjectList, ...client.ListOption) error {
	panic("not used")
}

// logLines collects log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

const config = `{"ignition":{"version":"3.4.0"}}`

func newTestServer(t *testing.T, ttl time.Duration) (*Server, *clocktesting.FakePassiveClock, *logLines, func(token string) int) {
	t.Helper()
	served := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg-ignition", Labels: map[string]string{ServedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "OpenShiftConfig", Name: "cfg", UID: "uid-1", Controller: ptr.To(true)}}},
		Data: map[string][]byte{"value": []byte(config)},
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	logs := &logLines{}
	log := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.lines = append(logs.lines, prefix+" "+args)
	}, funcr.Options{})
	s, err := New(Options{Client: secrets{client.ObjectKeyFromObject(served): served}, Key: []byte("0123456789abcdef0123456789abcdef"),
		BaseURL: "http://192.0.2.1:6181", TokenTTL: ttl, Clock: clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	get := func(token string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, ts.URL+PathPrefix+"ns/cfg-ignition", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	return s, clk, logs, get
}

// TestTokenExpires: a token is accepted until its expiry and refused
// after it, with a log line that names the config but not the token.
func TestTokenExpires(t *testing.T) {
	g := NewWithT(t)
	s, clk, logs, get := newTestServer(t, time.Hour)
	start := clk.Now()
	token, expiry := s.SignedToken("ns", "cfg-ignition", "uid-1")
	g.Expect(expiry).To(Equal(start.Add(time.Hour)))
	g.Expect(s.Token("ns", "cfg-ignition", "uid-1")).To(Equal(token), "the same second, the same token")
	got, ok := TokenExpiry(token)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(BeTemporally("==", expiry))

	g.Expect(get(token)).To(Equal(http.StatusOK))
	clk.SetTime(start.Add(time.Hour))
	g.Expect(get(token)).To(Equal(http.StatusOK), "valid through its expiry second")
	g.Expect(logs.String()).To(BeEmpty())

	clk.SetTime(start.Add(time.Hour + time.Second))
	g.Expect(get(token)).To(Equal(http.StatusForbidden))
	g.Expect(logs.String()).To(ContainSubstring("Refused an expired Ignition token"))
	g.Expect(logs.String()).To(ContainSubstring(`"secret"="ns/cfg-ignition"`))
	g.Expect(logs.String()).To(ContainSubstring(expiry.UTC().Format(time.RFC3339)))
	_, sig, _ := strings.Cut(token, ".")
	g.Expect(logs.String()).NotTo(ContainSubstring(sig), "never the token")

	g.Expect(get(s.Token("ns", "cfg-ignition", "uid-1"))).To(Equal(http.StatusOK), "a new token works")
}

// TestTokenTampered: the expiry is signed; changing it, or using another
// owner's, Secret's or key's token, is refused without a log line.
func TestTokenTampered(t *testing.T) {
	g := NewWithT(t)
	s, clk, logs, get := newTestServer(t, time.Hour)
	token := s.Token("ns", "cfg-ignition", "uid-1")
	exp, sig, ok := strings.Cut(token, ".")
	g.Expect(ok).To(BeTrue())
	unix, err := strconv.ParseInt(exp, 10, 64)
	g.Expect(err).NotTo(HaveOccurred())

	later := strconv.FormatInt(unix+365*24*3600, 10) + "." + sig
	g.Expect(get(later)).To(Equal(http.StatusForbidden), "a later expiry with the old signature")
	clk.SetTime(clk.Now().Add(2 * time.Hour))
	g.Expect(get(later)).To(Equal(http.StatusForbidden), "also once the real expiry passed")
	clk.SetTime(clk.Now().Add(-2 * time.Hour))

	other, err := New(Options{Key: []byte("another key of sixteen bytes+"), BaseURL: "http://x", Clock: clk})
	g.Expect(err).NotTo(HaveOccurred())
	for name, bad := range map[string]string{
		"no expiry":      sig,
		"empty expiry":   "." + sig,
		"bad expiry":     "soon." + sig,
		"other owner":    s.Token("ns", "cfg-ignition", "uid-2"),
		"other Secret":   s.Token("ns", "other", "uid-1"),
		"other key":      other.Token("ns", "cfg-ignition", "uid-1"),
		"the old format": sig + sig,
	} {
		g.Expect(get(bad)).To(Equal(http.StatusForbidden), name)
	}
	g.Expect(get("")).To(Equal(http.StatusUnauthorized))
	g.Expect(get(token)).To(Equal(http.StatusOK))
	g.Expect(logs.String()).To(BeEmpty(), "only expired, well-signed tokens are worth a line")
}

func TestTokenTTL(t *testing.T) {
	g := NewWithT(t)
	s, clk, _, _ := newTestServer(t, 0)
	_, expiry := s.SignedToken("ns", "cfg-ignition", "uid-1")
	g.Expect(expiry).To(Equal(clk.Now().Add(DefaultTokenTTL)), "0 is the default")
	g.Expect(s.RenewIn(expiry)).To(Equal(DefaultTokenTTL / 2))
	clk.SetTime(clk.Now().Add(DefaultTokenTTL / 2))
	g.Expect(s.RenewIn(expiry)).To(BeZero())

	_, err := New(Options{Key: []byte("0123456789abcdef"), BaseURL: "http://x", TokenTTL: -time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("negative")))
	_, ok := TokenExpiry("garbage")
	g.Expect(ok).To(BeFalse())
}

// FuzzVerify: no token but the one the server signs is accepted.
func FuzzVerify(f *testing.F) {
	for _, s := range []string{"1893553445.abc", ".", "x.y", "", "-1.z", "99999999999999999999.a"} {
		f.Add(s)
	}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1893553445, 0))
	s, err := New(Options{Key: []byte("0123456789abcdef"), BaseURL: "http://x", Clock: clk})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		_, _ = TokenExpiry(token)
		if _, err := s.verify(token, "ns", "n", "uid"); err == nil && token != s.Token("ns", "n", "uid") {
			t.Fatalf("%q verified", token)
		}
	})
}
