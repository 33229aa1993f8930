package sim

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/internal/certs"
)

// tlsServer serves https with a certificate for 127.0.0.1 of a CA of its
// own, whose PEM it returns.
func tlsServer(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	ca, err := certs.NewCA("sim-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.Spec{CommonName: "hub", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, ca.Cert
}

// get fetches url with rt and returns the error, if any.
func get(rt http.RoundTripper, url string) error {
	resp, err := (&http.Client{Transport: rt}).Get(url) //nolint:noctx // a test's loopback URL
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// TestFirmwareTrust: a lab's BMCs and firmware trust the hub's CA, read
// from its file at each connection (the lab may start before the hub), or
// with UnverifiedMedia verify nothing; the agents they boot trust the CA
// of their boot configuration, and refuse a server another CA signed.
func TestFirmwareTrust(t *testing.T) {
	g := NewWithT(t)
	hub, hubCA := tlsServer(t)
	other, otherCA := tlsServer(t)
	caOf := func(s *httptest.Server) []byte {
		return map[*httptest.Server][]byte{hub: hubCA, other: otherCA}[s]
	}
	const unknown = "certificate signed by unknown authority"

	caFile := filepath.Join(t.TempDir(), "ca.crt")
	rt := LabOptions{CAFile: caFile}.firmwareTransport()
	g.Expect(get(rt, hub.URL)).To(MatchError(ContainSubstring(unknown)), "no CA yet")
	g.Expect(os.WriteFile(caFile, caOf(hub), 0o600)).To(Succeed())
	g.Expect(get(rt, hub.URL)).To(Succeed(), "the hub made its CA")
	g.Expect(get(rt, other.URL)).To(MatchError(ContainSubstring(unknown)))

	g.Expect(get(LabOptions{CA: caOf(hub)}.firmwareTransport(), hub.URL)).To(Succeed())
	g.Expect(get(LabOptions{CA: caOf(other)}.firmwareTransport(), hub.URL)).To(MatchError(ContainSubstring(unknown)))
	g.Expect(get(LabOptions{UnverifiedMedia: true}.firmwareTransport(), hub.URL)).To(Succeed())

	f := &Firmware{HTTP: &http.Client{Transport: LabOptions{UnverifiedMedia: true}.firmwareTransport()}}
	agent, err := f.agentHTTP(nil, string(caOf(hub)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(agent.Transport, hub.URL)).To(Succeed())
	wrong, err := f.agentHTTP(nil, string(caOf(other)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(wrong.Transport, hub.URL)).To(MatchError(ContainSubstring(unknown)), "an agent trusts its boot configuration's CA, not its BMC's choice")
}
