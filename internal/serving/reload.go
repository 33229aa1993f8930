package serving

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"sync"

	"github.com/go-logr/logr"
)

// reloaded is a value parsed from files, parsed again on the first use
// after one of them changed: cert-manager renews a server's certificate,
// key and (self-signed) CA in the Secret mounted into the manager, and the
// server serves the new certificate and hands machines the new CA without
// a restart. A change is a new modification time, size
// or file (the kubelet replaces a Secret volume's files by swapping a
// symlink); checking costs a stat per file. When the changed files cannot
// be parsed (a key that does not match its certificate yet), the previous
// value stays in use and the error is logged once.
type reloaded[T any] struct {
	paths []string
	parse func() (T, error)
	what  string // what the value is, for the log
	log   logr.Logger

	mu     sync.Mutex
	value  T
	seen   []fs.FileInfo // of the files value was parsed from
	failed []fs.FileInfo // of files that did not parse, not parsed again
	logged string        // the error last logged
}

// load parses the files for the first time: an error is the caller's.
func (r *reloaded[T]) load() error {
	seen, err := stat(r.paths)
	if err != nil {
		return err
	}
	if r.value, err = r.parse(); err != nil {
		return err
	}
	r.seen = seen
	return nil
}

// get returns the value, parsed again if the files changed since.
func (r *reloaded[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	now, err := stat(r.paths)
	if err == nil && (sameFiles(now, r.seen) || sameFiles(now, r.failed)) {
		return r.value
	}
	var v T
	if err == nil {
		v, err = r.parse()
	}
	if err != nil {
		r.failed = now
		if err.Error() != r.logged {
			r.logged = err.Error()
			r.log.Error(err, "Reading the changed files of the "+r.what+"; still using the previous ones", "files", r.paths)
		}
		return r.value
	}
	r.value, r.seen, r.failed, r.logged = v, now, nil, ""
	r.log.Info("Read the changed files of the "+r.what, "files", r.paths)
	return r.value
}

func stat(paths []string) ([]fs.FileInfo, error) {
	infos := make([]fs.FileInfo, len(paths))
	for i, p := range paths {
		var err error
		if infos[i], err = os.Stat(p); err != nil {
			return nil, err
		}
	}
	return infos, nil
}

func sameFiles(a, b []fs.FileInfo) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}

// Certificate is a server's certificate and key, read from their files
// again after they change (see reloaded).
type Certificate struct{ r *reloaded[*tls.Certificate] }

// NewCertificate reads certFile and keyFile (PEM) of the server named
// server ("ignition server"); log receives a line when they are read
// again, or cannot be.
func NewCertificate(certFile, keyFile, server string, log logr.Logger) (*Certificate, error) {
	r := &reloaded[*tls.Certificate]{paths: []string{certFile, keyFile}, what: server + "'s certificate", log: log,
		parse: func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			return &c, err
		}}
	if err := r.load(); err != nil {
		return nil, err
	}
	return &Certificate{r: r}, nil
}

// GetCertificate is for tls.Config.GetCertificate: the certificate, read
// again if its files changed.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.r.get(), nil
}

// CA is the CA bundle machines trust for a server, read from its file
// again after it changes.
type CA struct{ r *reloaded[[]byte] }

// NewCA reads caFile (PEM, at least one certificate), the CA machines
// trust for the server named server.
func NewCA(caFile, server string, log logr.Logger) (*CA, error) {
	r := &reloaded[[]byte]{paths: []string{caFile}, what: "CA machines trust for the " + server, log: log,
		parse: func() ([]byte, error) {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return nil, err
			}
			if !x509.NewCertPool().AppendCertsFromPEM(pem) {
				return nil, errors.New(caFile + ": no PEM certificate")
			}
			return pem, nil
		}}
	if err := r.load(); err != nil {
		return nil, err
	}
	return &CA{r: r}, nil
}

// PEM is the bundle as its file holds it now; nil for a nil CA (a server
// whose machines need none beyond their system roots, or plain http).
func (c *CA) PEM() []byte {
	if c == nil {
		return nil
	}
	return c.r.get()
}
