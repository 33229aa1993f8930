package serving

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/internal/certs"
)

// tlsFiles writes a CA and a serving certificate of it for 127.0.0.1.
func tlsFiles(t *testing.T) (TLSFiles, []byte) {
	t.Helper()
	ca, err := certs.NewCA("serving-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.Spec{CommonName: "server", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := TLSFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAFile: filepath.Join(dir, "ca.crt")}
	for path, data := range map[string][]byte{f.CertFile: leaf.Cert, f.KeyFile: leaf.Key, f.CAFile: ca.Cert} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f, ca.Cert
}

func trustingClient(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: deadline, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// TestTLSServer: a server on Listen with TLSFiles serves https within its
// budgets: a client trusting its CA is served, one trusting another CA
// refuses it, and a client that opens a connection and says nothing (no
// handshake) is cut off.
func TestTLSServer(t *testing.T) {
	g := NewWithT(t)
	files, ca := tlsFiles(t)
	_, otherCA := tlsFiles(t)
	ln, err := Listen(nil, "127.0.0.1:0", files, "test server", logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		Options{Name: "test", Budgets: Budgets{ReadHeaderTimeout: 300 * time.Millisecond}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + ln.Addr().String() + "/"

	resp, err := trustingClient(ca).Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

	resp, err = trustingClient(otherCA).Get(url)
	if err == nil {
		_ = resp.Body.Close()
	}
	g.Expect(err).To(MatchError(ContainSubstring("certificate signed by unknown authority")))

	conn, err := net.Dial("tcp", ln.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	g.Expect(closedByServer(t, conn)).To(BeEmpty())
}

func TestTLSFilesCheck(t *testing.T) {
	files, _ := tlsFiles(t)
	for _, tc := range []struct {
		name     string
		files    TLSFiles
		insecure bool
		needCA   bool
		want     string
	}{
		{"https", files, false, true, ""},
		{"plain http, said so", TLSFiles{}, true, true, ""},
		{"plain http, not said", TLSFiles{}, false, true, "--deploy-insecure-http"},
		{"both", files, true, true, "goes with no --deploy-cert-file"},
		{"no key", TLSFiles{CertFile: files.CertFile, CAFile: files.CAFile}, false, true, "both --deploy-cert-file and --deploy-key-file"},
		{"no CA", TLSFiles{CertFile: files.CertFile, KeyFile: files.KeyFile}, false, true, "--deploy-ca-file is required"},
		{"no CA needed", TLSFiles{CertFile: files.CertFile, KeyFile: files.KeyFile}, false, false, ""},
		{"missing file", TLSFiles{CertFile: files.CertFile, KeyFile: files.KeyFile + ".gone", CAFile: files.CAFile}, false, true, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.files.Check("deploy", tc.insecure, tc.needCA)
			if tc.want == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
