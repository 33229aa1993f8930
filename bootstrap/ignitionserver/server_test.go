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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ignitionapi "github.com/metalshift/metalshift/api/ignition/v1"
)

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

// testServer is a server of one served config, with a fake clock.
type testServer struct {
	*Server
	clk    *clocktesting.FakePassiveClock
	logs   *logLines
	client *countingClient
	served *corev1.Secret
	owner  types.UID
	url    string
}

func newTestServer(t *testing.T, ttl time.Duration) *testServer {
	t.Helper()
	served, owner := servedSecret(t)
	ts := &testServer{clk: clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second)), logs: &logLines{},
		client: &countingClient{Client: env.Client}, served: served, owner: owner}
	log := funcr.New(func(prefix, args string) {
		ts.logs.mu.Lock()
		defer ts.logs.mu.Unlock()
		ts.logs.lines = append(ts.logs.lines, prefix+" "+args)
	}, funcr.Options{})
	s, err := New(Options{Client: ts.client, Key: []byte("0123456789abcdef0123456789abcdef"),
		BaseURL: "http://192.0.2.1:6181", TokenTTL: ttl, Clock: ts.clk, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = s
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	ts.url = hs.URL + PathPrefix + served.Namespace + "/" + served.Name
	return ts
}

// get fetches the config with token and returns the status code.
func (ts *testServer) get(t *testing.T, token string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, ts.url, nil)
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

func (ts *testServer) token() string {
	return ts.Token(ts.served.Namespace, ts.served.Name, ts.owner)
}

// TestTokenExpires: a token is accepted until its expiry and refused
// after it, with a log line that names the config but not the token.
func TestTokenExpires(t *testing.T) {
	g := NewWithT(t)
	ts := newTestServer(t, time.Hour)
	start := ts.clk.Now()
	token, expiry := ts.SignedToken(ts.served.Namespace, ts.served.Name, ts.owner)
	g.Expect(expiry).To(Equal(start.Add(time.Hour)))
	g.Expect(ts.token()).To(Equal(token), "the same second, the same token")
	got, ok := ignitionapi.TokenExpiry(token)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(BeTemporally("==", expiry))

	g.Expect(ts.get(t, token)).To(Equal(http.StatusOK))
	ts.clk.SetTime(start.Add(10 * time.Minute))
	g.Expect(ts.get(t, token)).To(Equal(http.StatusOK), "again, within the fetch window")
	g.Expect(ts.logs.String()).To(BeEmpty())

	ts.clk.SetTime(start.Add(time.Hour + time.Second))
	g.Expect(ts.get(t, token)).To(Equal(http.StatusForbidden))
	g.Expect(ts.logs.String()).To(ContainSubstring("Refused an expired Ignition token"))
	g.Expect(ts.logs.String()).To(ContainSubstring(`"secret"="` + ts.served.Namespace + `/cfg-ignition"`))
	g.Expect(ts.logs.String()).To(ContainSubstring(expiry.UTC().Format(time.RFC3339)))
	g.Expect(ts.logs.String()).NotTo(ContainSubstring(token[strings.LastIndex(token, ".")+1:]), "never the token")
}

// TestTokenTampered: the expiry and owner are signed; changing them, or
// using another owner's, Secret's or key's token, is refused without a
// log line, and before anything is read from the API.
func TestTokenTampered(t *testing.T) {
	g := NewWithT(t)
	ts := newTestServer(t, time.Hour)
	ns, name := ts.served.Namespace, ts.served.Name
	token := ts.token()
	parts := strings.Split(token, ".")
	g.Expect(parts).To(HaveLen(3))
	unix, err := strconv.ParseInt(parts[0], 10, 64)
	g.Expect(err).NotTo(HaveOccurred())

	other, err := New(Options{Key: []byte("another key of sixteen bytes+"), BaseURL: "http://x", Clock: ts.clk})
	g.Expect(err).NotTo(HaveOccurred())
	for name, bad := range map[string]string{
		"a later expiry":                strconv.FormatInt(unix+365*24*3600, 10) + "." + parts[1] + "." + parts[2],
		"a non-canonical expiry":        "+" + token,
		"another owner, same signature": parts[0] + ".0c6b3e9a-1234-4000-8000-000000000001." + parts[2],
		"no expiry":                     parts[1] + "." + parts[2],
		"empty expiry":                  "." + parts[1] + "." + parts[2],
		"bad expiry":                    "soon." + parts[1] + "." + parts[2],
		"other Secret":                  ts.Token(ns, "other", ts.owner),
		"other namespace":               ts.Token("other", name, ts.owner),
		"other key":                     other.Token(ns, name, ts.owner),
		"the old format":                parts[0] + "." + parts[2],
		"garbage":                       "garbage",
	} {
		g.Expect(ts.get(t, bad)).To(Equal(http.StatusForbidden), name)
	}
	g.Expect(ts.client.gets.Load()).To(BeZero(), "no API read for a token that is not well signed")
	g.Expect(ts.get(t, "")).To(Equal(http.StatusUnauthorized))

	// Well signed for another owner (a recreated config): read, refused.
	g.Expect(ts.get(t, ts.Token(ns, name, "0c6b3e9a-1234-4000-8000-000000000001"))).To(Equal(http.StatusForbidden))
	ts.clk.SetTime(ts.clk.Now().Add(2 * time.Hour))
	gets := ts.client.gets.Load()
	g.Expect(ts.get(t, token)).To(Equal(http.StatusForbidden), "expired")
	g.Expect(ts.client.gets.Load()).To(Equal(gets), "no API read for an expired token")
	ts.clk.SetTime(ts.clk.Now().Add(-2 * time.Hour))
	g.Expect(ts.get(t, token)).To(Equal(http.StatusOK))
	g.Expect(ts.logs.String()).NotTo(ContainSubstring("Refused a fetch"))
}

// TestFetchWindow: the first fetch is recorded on the served Secret; the
// config is served for the fetch window after it, then refused for any
// token, a re-signed one too, with a log line that names the config.
func TestFetchWindow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ts := newTestServer(t, 4*time.Hour)
	first := ts.clk.Now()
	g.Expect(ts.get(t, ts.token())).To(Equal(http.StatusOK))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts.served), sec)).To(Succeed())
	g.Expect(sec.Annotations).To(HaveKeyWithValue(FirstFetchAnnotation, first.UTC().Format(time.RFC3339)))
	g.Expect(sec.Data["value"]).To(Equal([]byte(config)), "the config is left as it was")

	ts.clk.SetTime(first.Add(DefaultFetchWindow))
	g.Expect(ts.get(t, ts.token())).To(Equal(http.StatusOK), "a retried first boot, within the window")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ts.served), sec)).To(Succeed())
	g.Expect(sec.Annotations).To(HaveKeyWithValue(FirstFetchAnnotation, first.UTC().Format(time.RFC3339)), "the first fetch stays")

	ts.clk.SetTime(first.Add(DefaultFetchWindow + time.Second))
	token := ts.token()
	g.Expect(ts.get(t, token)).To(Equal(http.StatusForbidden), "a valid, re-signed token after the window")
	g.Expect(ts.logs.String()).To(ContainSubstring("Refused a fetch of a served Ignition config after its fetch window"))
	g.Expect(ts.logs.String()).To(ContainSubstring(ts.served.Namespace + "/cfg-ignition"))
	g.Expect(ts.logs.String()).NotTo(ContainSubstring(token[strings.LastIndex(token, ".")+1:]), "never the token")

	// Another config has a window of its own.
	other := newTestServer(t, 4*time.Hour)
	g.Expect(other.get(t, other.token())).To(Equal(http.StatusOK))
}

func TestTokenTTL(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s, err := New(Options{Key: []byte("0123456789abcdef"), BaseURL: "http://x", Clock: clk})
	g.Expect(err).NotTo(HaveOccurred())
	_, expiry := s.SignedToken("ns", "cfg-ignition", "uid-1")
	g.Expect(expiry).To(Equal(clk.Now().Add(DefaultTokenTTL).Truncate(time.Second)), "0 is the default")
	g.Expect(s.RenewIn(expiry)).To(BeNumerically("~", DefaultTokenTTL/2, time.Second))
	clk.SetTime(clk.Now().Add(DefaultTokenTTL / 2))
	g.Expect(s.RenewIn(expiry)).To(BeNumerically("<=", 0))

	_, err = New(Options{Key: []byte("0123456789abcdef"), BaseURL: "http://x", TokenTTL: -time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("negative")))
	_, err = New(Options{Key: []byte("0123456789abcdef"), BaseURL: "http://x", FetchWindow: -time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("negative")))
	_, ok := ignitionapi.TokenExpiry("garbage")
	g.Expect(ok).To(BeFalse())
}

// FuzzVerify: a token verifies, from itself alone, only for the Secret it
// was made for, until its expiry, bound to its owner; a token the fuzzer
// makes up verifies only if it is exactly what the server signs.
func FuzzVerify(f *testing.F) {
	for _, s := range []string{"1893553445.uid.abc", ".", "x.y.z", "", "-1.u.z", "99999999999999999999.u.a", "+1893553445.uid.abc"} {
		f.Add(s, "n", "uid", uint(0), byte(1))
	}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1893553445, 0))
	s, err := New(Options{Key: []byte("0123456789abcdef"), BaseURL: "http://x", Clock: clk})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token, name, owner string, at uint, flip byte) {
		_, _ = ignitionapi.TokenExpiry(token)
		if got, _, err := s.verify(token, "ns", "n"); err == nil {
			exp, _ := ignitionapi.TokenExpiry(token)
			if token != s.tokenAt("ns", "n", got, exp) || clk.Now().After(exp) {
				t.Fatalf("%q verified, but is not a token the server made", token)
			}
		}
		if !validUID(owner) {
			return
		}
		signed := s.Token("ns", "n", types.UID(owner))
		got, _, err := s.verify(signed, "ns", "n")
		if err != nil || got != types.UID(owner) {
			t.Fatalf("a token for owner %q is refused (%v) or read as %q", owner, err, got)
		}
		if name != "n" {
			if _, _, err := s.verify(signed, "ns", name); err == nil {
				t.Fatalf("a token for Secret ns/n is accepted for ns/%s", name)
			}
		}
		if flip != 0 {
			b := []byte(signed)
			b[at%uint(len(b))] ^= flip
			if _, _, err := s.verify(string(b), "ns", "n"); err == nil {
				t.Fatalf("token %q changed to %q is accepted", signed, b)
			}
		}
	})
}
