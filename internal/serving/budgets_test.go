package serving

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// deadline bounds every wait of these tests: what a budget cuts off is
// cut off long before.
const deadline = 30 * time.Second

// serve runs h within o on a listener of 127.0.0.1 until the test ends.
// Accepted connections get a small send buffer, so that a response to a
// client that reads slowly waits on the client, not on the kernel.
func serve(t *testing.T, h http.Handler, o Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(h, o)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(smallBuffers{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (any of 127.0.0.0/8) with a small receive buffer.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10) })
	}}
	return &http.Client{Timeout: deadline, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// closedByServer reads conn until the server closes it, within deadline,
// and returns what it read.
func closedByServer(t *testing.T, conn net.Conn) []byte {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(deadline))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", deadline)
	}
	return got
}

// dribble writes one of parts every interval until a write fails or done
// closes.
func dribble(conn net.Conn, parts []string, interval time.Duration, done <-chan struct{}) {
	for _, p := range parts {
		if _, err := conn.Write([]byte(p)); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(interval):
		}
	}
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	g := NewWithT(t)
	var called atomic.Int32
	addr := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Add(1) }),
		Options{Name: "test", Budgets: Budgets{ReadHeaderTimeout: 300 * time.Millisecond}})
	conn, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	// A header line every 50ms for 100s: far longer than the budget.
	parts := []string{"GET / HTTP/1.1\r\nHost: x\r\n"}
	for i := range 2000 {
		parts = append(parts, fmt.Sprintf("X-Slow-%d: y\r\n", i))
	}
	done := make(chan struct{})
	defer close(done)
	go dribble(conn, parts, 50*time.Millisecond, done)

	g.Expect(closedByServer(t, conn)).To(BeEmpty(), "no answer to a request never finished")
	g.Expect(called.Load()).To(BeZero())
}

func TestSlowBodyIsCutOff(t *testing.T) {
	g := NewWithT(t)
	const size = 100000
	read := make(chan int64, 1)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		read <- n
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}), Options{Name: "test", Budgets: Budgets{ReadTimeout: 500 * time.Millisecond}})
	conn, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	parts := []string{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"}
	for range size {
		parts = append(parts, "z") // a byte every 20ms: over half an hour
	}
	done := make(chan struct{})
	defer close(done)
	go dribble(conn, parts, 20*time.Millisecond, done)

	closedByServer(t, conn)
	g.Expect(<-read).To(BeNumerically("<", size), "the handler got the whole body")
}

func TestOversizedBodies(t *testing.T) {
	const limit = 1000
	var seen atomic.Int64
	var calls atomic.Int32
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		n, err := io.Copy(io.Discard, r.Body)
		seen.Store(n)
		if err != nil {
			http.Error(w, "invalid body: "+err.Error(), http.StatusBadRequest) // the budget makes it 413
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), Options{Name: "test", Budgets: Budgets{MaxBodyBytes: limit}})
	c := clientFrom("127.0.0.1")
	post := func(body io.Reader, length int64) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+"/", body)
		req.ContentLength = length
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	big := bytes.Repeat([]byte("a"), 10*limit)

	t.Run("declared length", func(t *testing.T) {
		g := NewWithT(t)
		calls.Store(0)
		g.Expect(post(bytes.NewReader(big), int64(len(big)))).To(Equal(http.StatusRequestEntityTooLarge))
		g.Expect(calls.Load()).To(BeZero(), "the handler was called")
	})
	t.Run("chunked", func(t *testing.T) {
		g := NewWithT(t)
		// An unknown length: the client sends it chunked.
		g.Expect(post(io.MultiReader(bytes.NewReader(big)), -1)).To(Equal(http.StatusRequestEntityTooLarge))
		g.Expect(seen.Load()).To(BeNumerically("<=", limit))
	})
	t.Run("at the cap", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(post(bytes.NewReader(big[:limit]), limit)).To(Equal(http.StatusNoContent))
		g.Expect(seen.Load()).To(BeEquivalentTo(limit))
	})
}

func TestUnauthenticatedBurstIsLimitedPerSource(t *testing.T) {
	g := NewWithT(t)
	addr := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Options{Name: "test",
		Budgets:         Budgets{Unauthenticated: Rate{PerSecond: 1.0 / 3600, Burst: 3}},
		Unauthenticated: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/public/") }})
	get := func(c *http.Client, path string) (int, http.Header) {
		resp, err := c.Get("http://" + addr + path)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	status := func(c *http.Client, path string) int { code, _ := get(c, path); return code }
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	for range 3 {
		g.Expect(status(a, "/public/by-mac/x")).To(Equal(http.StatusOK))
	}
	code, header := get(a, "/public/by-mac/y")
	g.Expect(code).To(Equal(http.StatusTooManyRequests))
	retry, err := strconv.Atoi(header.Get("Retry-After"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(retry).To(BeNumerically(">", 60), "a token comes back in an hour")

	g.Expect(status(b, "/public/by-mac/x")).To(Equal(http.StatusOK), "another source is served")
	g.Expect(status(a, "/api/instructions")).To(Equal(http.StatusOK), "authenticated requests do not count")
}

func TestFailedAuthenticationsAreLimitedPerSource(t *testing.T) {
	g := NewWithT(t)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "good":
		case "forbidden":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}), Options{Name: "test", Budgets: Budgets{AuthFailures: Rate{PerSecond: 1.0 / 3600, Burst: 2}}})
	get := func(c *http.Client, auth string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+"/api", nil)
		req.Header.Set("Authorization", auth)
		resp, err := c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.3")
	g.Expect(get(a, "good")).To(Equal(http.StatusOK), "successes do not count")
	g.Expect(get(a, "forged")).To(Equal(http.StatusUnauthorized))
	g.Expect(get(a, "forbidden")).To(Equal(http.StatusForbidden))
	g.Expect(get(a, "forged")).To(Equal(http.StatusTooManyRequests))
	g.Expect(get(a, "good")).To(Equal(http.StatusTooManyRequests), "the source is refused, whatever it sends")
	g.Expect(get(b, "good")).To(Equal(http.StatusOK), "another source is served")
}

func TestLongDownloads(t *testing.T) {
	const size = 2 << 20
	content := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	stall := time.Second
	// download serves content; ended receives when a response ends.
	download := func(t *testing.T) (addr string, ended <-chan struct{}) {
		ch := make(chan struct{}, 1)
		return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "image.iso", time.Time{}, bytes.NewReader(content))
			ch <- struct{}{}
		}), Options{Name: "test", Budgets: Budgets{WriteStallTimeout: stall}}), ch
	}

	t.Run("a slow steady reader gets it all", func(t *testing.T) {
		g := NewWithT(t)
		addr, _ := download(t)
		resp, err := clientFrom("127.0.0.1").Get("http://" + addr + "/image.iso")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		// 16 KiB every 15ms: 128 reads, about twice the stall timeout in
		// all, each part of the response taken well within it.
		var got bytes.Buffer
		buf := make([]byte, 16<<10)
		start := time.Now()
		for {
			n, err := io.ReadFull(resp.Body, buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
			time.Sleep(15 * time.Millisecond)
		}
		g.Expect(got.Len()).To(Equal(size))
		g.Expect(bytes.Equal(got.Bytes(), content)).To(BeTrue())
		g.Expect(time.Since(start)).To(BeNumerically(">", stall), "the download outlasted a whole-response timeout of the stall timeout")
	})

	t.Run("a reader that stops is cut off", func(t *testing.T) {
		g := NewWithT(t)
		addr, ended := download(t)
		conn, err := net.Dial("tcp", addr)
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		_, err = conn.Write([]byte("GET /image.iso HTTP/1.1\r\nHost: x\r\n\r\n"))
		g.Expect(err).NotTo(HaveOccurred())
		select {
		case <-ended:
		case <-time.After(deadline):
			t.Fatal("the response to a client that reads nothing did not end")
		}
		g.Expect(len(closedByServer(t, conn))).To(BeNumerically("<", size))
	})
}

func TestSource(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:5000", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:5000", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa::1]:5000", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:5000", "2001:db8:1:2::/64"},
		{"not an address", "not an address"},
	} {
		t.Run(tc.remote, func(t *testing.T) {
			NewWithT(t).Expect(Source(&http.Request{RemoteAddr: tc.remote})).To(Equal(tc.want))
		})
	}
}

func TestBudgetsValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Budgets{}.WithDefaults().Validate()).To(Succeed())
	g.Expect(Budgets{AuthFailures: Unlimited}.WithDefaults().Validate()).To(Succeed())
	g.Expect(Budgets{ReadTimeout: -time.Second}.WithDefaults().Validate()).To(MatchError(ContainSubstring("read timeout")))
	g.Expect(Budgets{Unauthenticated: Rate{PerSecond: 1}}.WithDefaults().Validate()).To(MatchError(ContainSubstring("burst")))
}

func TestMatching(t *testing.T) {
	match := Matching("GET /images/", "POST /api/infra-envs/{ie}/hosts")
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{http.MethodGet, "/images/deploy.iso", true},
		{http.MethodHead, "/images/deploy.iso", true},
		{http.MethodPost, "/api/infra-envs/x/hosts", true},
		{http.MethodGet, "/api/infra-envs/x/hosts", false},
		{http.MethodPost, "/api/infra-envs/x/hosts/y/instructions", false},
		{http.MethodGet, "/boot/by-mac/x", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r, _ := http.NewRequestWithContext(context.Background(), tc.method, "http://hub"+tc.path, nil)
			NewWithT(t).Expect(match(r)).To(Equal(tc.want))
		})
	}
}
