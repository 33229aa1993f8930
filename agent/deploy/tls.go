package deploy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"time"
)

// Transport is how an agent reaches the hub's servers: it trusts the PEM
// CAs of caPEM (a boot configuration's caCert: the CA of the server it
// names) besides the system's roots, and gives up on a server that accepts
// and never answers after a minute. An empty caPEM trusts the system's
// roots only.
func Transport(caPEM string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caPEM != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(caPEM)) {
			return nil, errors.New("the boot configuration's CA holds no PEM certificate")
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	t.ResponseHeaderTimeout = time.Minute
	return t, nil
}
