package console

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// browser is an HTTP client with the cookies of one console session.
type browser struct {
	hs   *httptest.Server
	http *http.Client
	csrf string
}

func newBrowser(hs *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	c := hs.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{hs: hs, http: c}
}

func (b *browser) do(g Gomega, method, path string, header map[string]string, body io.Reader) *http.Response {
	req, err := http.NewRequest(method, b.hs.URL+path, body)
	g.Expect(err).NotTo(HaveOccurred())
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.http.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	return resp
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// signIn posts token from the console's origin and reads the session's
// CSRF token from the fleet page; it returns the sign-in's status and
// cookies.
func (b *browser) signIn(g Gomega, token string) (int, []*http.Cookie) {
	resp := b.do(g, http.MethodPost, "/signin", map[string]string{"Origin": b.hs.URL, "Content-Type": "application/x-www-form-urlencoded"},
		strings.NewReader(url.Values{"token": {token}}.Encode()))
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther {
		page := b.do(g, http.MethodGet, "/fleet", nil, nil)
		defer page.Body.Close()
		data, _ := io.ReadAll(page.Body)
		m := csrfMeta.FindSubmatch(data)
		g.Expect(m).NotTo(BeNil(), "the fleet page carries the CSRF token")
		b.csrf = string(m[1])
	}
	return resp.StatusCode, resp.Cookies()
}

// approve posts an approval with the given headers.
func (b *browser) approve(g Gomega, ns, name string, header map[string]string) int {
	resp := b.do(g, http.MethodPost, "/api/agents/"+ns+"/"+name+"/approve", header, nil)
	resp.Body.Close()
	return resp.StatusCode
}

// edit posts an edit of an Agent's role and host name with the given
// headers.
func (b *browser) edit(g Gomega, ns, name, body string, header map[string]string) int {
	h := map[string]string{"Content-Type": "application/json"}
	maps.Copy(h, header)
	resp := b.do(g, http.MethodPost, "/api/agents/"+ns+"/"+name+"/spec", h, strings.NewReader(body))
	resp.Body.Close()
	return resp.StatusCode
}

// events reads the page's event stream until until returns true for the
// stream read so far, and returns it.
func (b *browser) events(g Gomega, page, namespace string, until func(string) bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a broken test only
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.hs.URL+"/api/watch/"+page+"?namespace="+namespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := b.http.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var seen strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if until(seen.String()) {
			return seen.String()
		}
	}
	g.Expect(sc.Err()).NotTo(HaveOccurred())
	return seen.String()
}

// TestAttacker plays someone without a session, a page of another site
// riding a session, and a tenant reaching past its namespace: the console
// refuses each, and no token reaches its logs.
func TestAttacker(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakeClock(time.Now())
	hs, logs := startConsole(t, true, clk)
	own, other := namespace(t, "own"), namespace(t, "other")
	ownAgent, otherAgent := newAgent(g, own, "a1"), newAgent(g, other, "a2")
	tenantToken := serviceAccountToken(t, own, "alice", everything, false)
	for _, ns := range []string{own, other} {
		g.Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: map[string]string{own: "c1", other: "c2"}[ns] + "-admin-kubeconfig"},
			Data: map[string][]byte{"kubeconfig": []byte("apiVersion: v1\nkind: Config\n")}})).To(Succeed())
	}

	t.Run("no session", func(t *testing.T) {
		g := NewWithT(t)
		anon := newBrowser(hs)
		resp := anon.do(g, http.MethodGet, "/fleet", nil, nil)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
		g.Expect(resp.Header.Get("Location")).To(Equal("/signin"))
		for _, path := range []string{"/api/watch/fleet", "/api/watch/hosts"} {
			resp := anon.do(g, http.MethodGet, path, nil, nil)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), path)
		}
		g.Expect(anon.approve(g, own, ownAgent.Name, map[string]string{"Origin": hs.URL, csrfHeader: "guess"})).To(Equal(http.StatusUnauthorized))
		for _, path := range []string{"/clusters/agent/" + own + "/c1/kubeconfig", "/api/watch/cluster/agent/" + own + "/c1", "/api/watch/infraenvs"} {
			resp := anon.do(g, http.MethodGet, path, nil, nil)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), path)
			g.Expect(string(body)).NotTo(ContainSubstring("kind: Config"), path)
		}
		resp = anon.do(g, http.MethodGet, "/clusters/agent/"+own+"/c1", nil, nil)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
		// A made-up session ID is no session.
		u, _ := url.Parse(hs.URL)
		anon.http.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: randomString()}})
		g.Expect(anon.approve(g, own, ownAgent.Name, map[string]string{"Origin": hs.URL, csrfHeader: "guess"})).To(Equal(http.StatusUnauthorized))
	})

	t.Run("bad token", func(t *testing.T) {
		g := NewWithT(t)
		b := newBrowser(hs)
		status, cookies := b.signIn(g, "not-a-token")
		g.Expect(status).To(Equal(http.StatusUnauthorized))
		g.Expect(cookies).To(BeEmpty())
		// A sign-in posted by another site's page is refused before the token is tried.
		resp := b.do(g, http.MethodPost, "/signin", map[string]string{"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"},
			strings.NewReader(url.Values{"token": {tenantToken}}.Encode()))
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
	})

	tenant := newBrowser(hs)
	t.Run("session cookie", func(t *testing.T) {
		g := NewWithT(t)
		status, cookies := tenant.signIn(g, tenantToken)
		g.Expect(status).To(Equal(http.StatusSeeOther))
		g.Expect(cookies).To(HaveLen(1))
		c := cookies[0]
		g.Expect(c.Name).To(Equal(cookieName))
		g.Expect(c.HttpOnly).To(BeTrue())
		g.Expect(c.Secure).To(BeTrue(), "served over TLS")
		g.Expect(c.SameSite).To(Equal(http.SameSiteStrictMode))
		g.Expect(c.Value).NotTo(ContainSubstring(tenantToken))
	})

	t.Run("write without CSRF token", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(tenant.approve(g, own, ownAgent.Name, map[string]string{"Origin": hs.URL})).To(Equal(http.StatusForbidden))
		g.Expect(tenant.approve(g, own, ownAgent.Name, map[string]string{"Origin": hs.URL, csrfHeader: "wrong"})).To(Equal(http.StatusForbidden))
		g.Expect(tenant.approve(g, own, ownAgent.Name, map[string]string{"Origin": "https://evil.example", csrfHeader: tenant.csrf})).To(Equal(http.StatusForbidden))
		g.Expect(tenant.approve(g, own, ownAgent.Name, map[string]string{csrfHeader: tenant.csrf})).To(Equal(http.StatusForbidden), "no Origin")
		g.Consistently(approved(ownAgent)).WithTimeout(0).Should(BeFalse())
		edit := `{"role":"worker","hostname":"forged"}`
		g.Expect(tenant.edit(g, own, ownAgent.Name, edit, map[string]string{"Origin": hs.URL})).To(Equal(http.StatusForbidden))
		g.Expect(tenant.edit(g, own, ownAgent.Name, edit, map[string]string{"Origin": "https://evil.example", csrfHeader: tenant.csrf})).To(Equal(http.StatusForbidden))
		g.Expect(agentSpec(g, ownAgent).Hostname).NotTo(Equal("forged"))
	})

	t.Run("tenant reaches past its namespace", func(t *testing.T) {
		g := NewWithT(t)
		// The console holds the API server's admin configuration: had it
		// used it, all namespaces would be listed.
		stream := tenant.events(g, "hosts", "", func(s string) bool {
			return strings.Contains(s, "You may not list Agents") && strings.Contains(s, "You may not list BareMetalHosts")
		})
		g.Expect(stream).To(ContainSubstring("You may not list Agents in all namespaces"))
		g.Expect(stream).NotTo(ContainSubstring(otherAgent.Name))
		g.Expect(tenant.approve(g, other, otherAgent.Name, map[string]string{"Origin": hs.URL, csrfHeader: tenant.csrf})).To(Equal(http.StatusForbidden))
		g.Expect(approved(otherAgent)()).To(BeFalse())
		g.Expect(tenant.edit(g, other, otherAgent.Name, `{"role":"worker","hostname":"taken"}`, map[string]string{"Origin": hs.URL, csrfHeader: tenant.csrf})).To(Equal(http.StatusForbidden))
		g.Expect(agentSpec(g, otherAgent).Hostname).NotTo(Equal("taken"))
		// Bad edits: refused before the API is asked.
		for _, body := range []string{`{"role":"root"}`, `{"role":"worker","hostname":"a b"}`, `{"role":"worker","extra":1}`, `not json`} {
			g.Expect(tenant.edit(g, own, ownAgent.Name, body, map[string]string{"Origin": hs.URL, csrfHeader: tenant.csrf})).To(Equal(http.StatusBadRequest), body)
		}
		// Another namespace's kubeconfig: the API server refuses the
		// Secret to the tenant, although the console could read it.
		resp := tenant.do(g, http.MethodGet, "/clusters/agent/"+other+"/c2/kubeconfig", nil, nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
		g.Expect(string(body)).To(ContainSubstring("You may not read the kubeconfig"))
		g.Expect(string(body)).NotTo(ContainSubstring("kind: Config"))
		resp = tenant.do(g, http.MethodGet, "/clusters/agent/"+own+"/c1/kubeconfig", nil, nil)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "its own namespace's, which its Role lets it read")
		g.Expect(string(body)).To(ContainSubstring("kind: Config"))
		// Its own namespace it sees and acts in.
		stream = tenant.events(g, "hosts", own, func(s string) bool { return strings.Contains(s, `"name":"a1"`) })
		g.Expect(stream).To(ContainSubstring(`"approved":false`))
		g.Expect(tenant.approve(g, own, ownAgent.Name, map[string]string{"Origin": hs.URL, csrfHeader: tenant.csrf})).To(Equal(http.StatusNoContent))
		g.Expect(approved(ownAgent)()).To(BeTrue())
	})

	t.Run("revoked token ends the session", func(t *testing.T) {
		g := NewWithT(t)
		bob := newBrowser(hs)
		status, _ := bob.signIn(g, serviceAccountToken(t, own, "bob", everything, false))
		g.Expect(status).To(Equal(http.StatusSeeOther))
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "bob"}}
		g.Expect(env.Client.Delete(context.Background(), sa)).To(Succeed())
		// The API server stops accepting the token once it sees the
		// deletion; the stream then says so, and the session is over.
		g.Eventually(func(g Gomega) {
			stream := bob.events(g, "hosts", own, func(s string) bool {
				return strings.Contains(s, "event: unauthorized") || strings.Contains(s, `"kind":"BareMetalHost"`)
			})
			g.Expect(stream).To(ContainSubstring("event: unauthorized"))
		}).Should(Succeed())
		resp := bob.do(g, http.MethodGet, "/api/watch/hosts", nil, nil)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	})

	t.Run("session expires", func(t *testing.T) {
		g := NewWithT(t)
		clk.Step(DefaultSessionTTL)
		resp := tenant.do(g, http.MethodGet, "/api/watch/fleet", nil, nil)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	})

	t.Run("no token in the logs", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(logs.String()).To(ContainSubstring("Signed in"), "the logs were captured")
		g.Expect(logs.String()).NotTo(ContainSubstring(tenantToken))
		g.Expect(logs.String()).NotTo(ContainSubstring("not-a-token"))
	})
}
