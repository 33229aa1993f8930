package ignitionserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/internal/certs"
	"github.com/metalshift/metalshift/internal/serving"
)

// secretVolume writes files as the kubelet updates a mounted Secret: into a
// new directory, then ..data swapped to it by a rename, each file a symlink
// through ..data.
type secretVolume struct {
	dir string
	n   int
}

func (v *secretVolume) write(t *testing.T, files map[string][]byte) {
	t.Helper()
	v.n++
	gen := fmt.Sprintf("..gen%d", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, gen), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(v.dir, gen, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// issued is a self-signed CA (cert-manager's selfSigned issuer makes the
// certificate its own CA; a CA and a leaf here) and a serving certificate
// for 127.0.0.1, as the files of the ignition server's Secret.
func issued(t *testing.T) (map[string][]byte, certs.KeyPair) {
	t.Helper()
	ca, err := certs.NewCA("ignition-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.Spec{CommonName: "ignition", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"ca.crt": ca.Cert, "tls.crt": leaf.Cert, "tls.key": leaf.Key}, leaf
}

// TestRenewedCertificate: after the files of the ignition server's Secret
// are replaced (cert-manager renewed the certificate, with a new CA), the
// next machine gets the new CA in its config and, trusting only that CA,
// fetches its config over https from the server, which serves the new
// certificate, all without a restart. Files that do not parse leave the
// previous ones in use, with one log line.
func TestRenewedCertificate(t *testing.T) {
	g := NewWithT(t)
	vol := &secretVolume{dir: t.TempDir()}
	first, firstLeaf := issued(t)
	vol.write(t, first)

	var logs logLines
	log := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.lines = append(logs.lines, prefix+" "+args)
	}, funcr.Options{})
	served, owner := servedSecret(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	s, err := New(Options{Client: env.Client, Key: []byte("0123456789abcdef0123456789abcdef"),
		BaseURL: "https://" + ln.Addr().String(), CAFile: filepath.Join(vol.dir, "ca.crt"), Log: log})
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := serving.NewCertificate(filepath.Join(vol.dir, "tls.crt"), filepath.Join(vol.dir, "tls.key"), "ignition server", log)
	g.Expect(err).NotTo(HaveOccurred())
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		_ = hs.Serve(tls.NewListener(ln, &tls.Config{GetCertificate: cert.GetCertificate, MinVersion: tls.VersionTLS12}))
	}()
	t.Cleanup(func() { _ = hs.Close() })

	// fetch is a machine booting with the config rendered now: it trusts
	// the CA in it, and only that one.
	fetch := func() (*x509.Certificate, string, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.CA()) {
			return nil, "", fmt.Errorf("the CA handed out is no PEM certificate")
		}
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, s.URL(served.Namespace, served.Name), nil)
		req.Header.Set("Authorization", "Bearer "+s.Token(served.Namespace, served.Name, owner))
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.TLS.PeerCertificates[0], string(body), err
	}
	leafOf := func(kp certs.KeyPair) *x509.Certificate {
		c, _, err := kp.Parse()
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}

	g.Expect(s.CA()).To(Equal(first["ca.crt"]))
	peer, body, err := fetch()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal(config))
	g.Expect(peer.Equal(leafOf(firstLeaf))).To(BeTrue())

	// Renewed: a new CA and certificate.
	renewed, renewedLeaf := issued(t)
	vol.write(t, renewed)
	g.Expect(s.CA()).To(Equal(renewed["ca.crt"]))
	peer, body, err = fetch()
	g.Expect(err).NotTo(HaveOccurred(), "a machine trusting the renewed CA reaches the server")
	g.Expect(body).To(Equal(config))
	g.Expect(peer.Equal(leafOf(renewedLeaf))).To(BeTrue())
	g.Expect(logs.String()).To(ContainSubstring("Read the changed files of the ignition server's certificate"))
	g.Expect(logs.String()).To(ContainSubstring("Read the changed files of the CA machines trust"))

	// Half written: a key that is not the certificate's, a CA that is no
	// PEM. The renewed ones stay in use; the error is logged once.
	broken, _ := issued(t)
	broken["tls.key"], broken["ca.crt"] = renewed["tls.key"], []byte("not a certificate")
	vol.write(t, broken)
	logs.reset()
	g.Expect(s.CA()).To(Equal(renewed["ca.crt"]))
	for range 2 {
		peer, _, err = fetch()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(peer.Equal(leafOf(renewedLeaf))).To(BeTrue())
	}
	g.Expect(logs.count()).To(Equal(2), "one line for the certificate, one for the CA: %s", logs.String())
	g.Expect(logs.String()).To(ContainSubstring("still using the previous ones"))
	g.Expect(logs.String()).NotTo(ContainSubstring("PRIVATE KEY"))

	// Then complete: used at once.
	vol.write(t, first)
	g.Expect(s.CA()).To(Equal(first["ca.crt"]))
	peer, _, err = fetch()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer.Equal(leafOf(firstLeaf))).To(BeTrue())
}

// TestMissingCAFile: a CA file that cannot be read is an error at start.
func TestMissingCAFile(t *testing.T) {
	_, err := New(Options{Key: []byte("0123456789abcdef0123456789abcdef"), BaseURL: "https://192.0.2.1:6181", CAFile: filepath.Join(t.TempDir(), "ca.crt")})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("the ignition server's CA")))
}

func (l *logLines) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = nil
}

func (l *logLines) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}
