package serving

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/go-logr/logr"
)

// TLSFiles are the files of a server's https: its certificate and key, and
// the CA bundle machines trust for it, which the server hands them in
// their boot configuration. Each is read again when it changes.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// Enabled tells whether the files make the server serve https.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

// Scheme is the scheme of the server's URLs: https when Enabled.
func (f TLSFiles) Scheme() string {
	if f.Enabled() {
		return "https"
	}
	return "http"
}

// Check says what is wrong with the files a manager's flags named, with
// those flags' prefix ("deploy" for --deploy-cert-file ...): https needs
// the certificate and its key, and with needCA the CA machines trust (the
// live image trusts no system roots); plain http only when insecure says
// so (--<prefix>-insecure-http).
func (f TLSFiles) Check(prefix string, insecure, needCA bool) error {
	switch {
	case f.Enabled() && insecure:
		return fmt.Errorf("--%s-insecure-http serves plain http: it goes with no --%[1]s-cert-file or --%[1]s-key-file", prefix)
	case insecure:
		return nil
	case !f.Enabled():
		return fmt.Errorf("the %s server serves https: give --%[1]s-cert-file, --%[1]s-key-file and --%[1]s-ca-file "+
			"(or --%[1]s-insecure-http for plain http, in a lab)", prefix)
	case f.CertFile == "" || f.KeyFile == "":
		return fmt.Errorf("https needs both --%s-cert-file and --%[1]s-key-file", prefix)
	case needCA && f.CAFile == "":
		return fmt.Errorf("--%s-ca-file is required with https: machines verify the server with it", prefix)
	}
	for _, p := range []string{f.CertFile, f.KeyFile, f.CAFile} {
		if _, err := os.Stat(p); p != "" && err != nil { // read by the server, again when they change
			return err
		}
	}
	return nil
}

// Listen is the listener of the server named server ("deploy server"):
// given, the plain TCP listener ln (a test's, or a hub's that holds its
// port), else one on addr; with https when the files are Enabled.
func Listen(ln net.Listener, addr string, f TLSFiles, server string, log logr.Logger) (net.Listener, error) {
	if ln != nil {
		return WithTLS(ln, f, server, log)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tl, err := WithTLS(ln, f, server, log)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return tl, nil
}

// WithTLS returns ln serving https with the files, when they are Enabled;
// ln itself otherwise.
func WithTLS(ln net.Listener, f TLSFiles, server string, log logr.Logger) (net.Listener, error) {
	if !f.Enabled() {
		return ln, nil
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("https needs both a certificate and a key file")
	}
	cert, err := NewCertificate(f.CertFile, f.KeyFile, server, log)
	if err != nil {
		return nil, err
	}
	// No NextProtos: HTTP/1.1, whose deadlines the budgets move.
	return tls.NewListener(ln, &tls.Config{GetCertificate: cert.GetCertificate, MinVersion: tls.VersionTLS12}), nil
}
