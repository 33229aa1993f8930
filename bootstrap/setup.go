package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/bootstrap/reconcilers/openshiftconfig"
)

// Options tune the bootstrap provider.
type Options struct {
	WatchFilterValue string

	// IgnitionServer serves configs too large for user data; without a
	// ListenAddr such configs are refused with a condition.
	IgnitionServer ignitionserver.Config
}

// Setup registers the provider's controllers (and the ignition server)
// with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	r := &openshiftconfig.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: opts.WatchFilterValue,
		MaxUserDataBytes: opts.IgnitionServer.MaxUserDataBytes,
	}
	if opts.IgnitionServer.ListenAddr != "" {
		s, err := addIgnitionServer(mgr, opts.IgnitionServer)
		if err != nil {
			return fmt.Errorf("ignition server: %w", err)
		}
		r.IgnitionServer = s
	}
	return r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}

func addIgnitionServer(mgr ctrl.Manager, o ignitionserver.Config) (*ignitionserver.Server, error) {
	tlsOn := o.CertFile != "" || o.KeyFile != ""
	if o.URL == "" {
		scheme := "http://"
		if tlsOn {
			scheme = "https://"
		}
		o.URL = scheme + o.ListenAddr
	}
	// Secrets are read directly: Cluster API's manager keeps them out of the cache.
	s, err := ignitionserver.New(ignitionserver.Options{Client: mgr.GetClient(), Key: o.SigningKey, BaseURL: o.URL, CA: o.CA, TokenTTL: o.TokenTTL})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.ListenAddr)
	if err != nil {
		return nil, err
	}
	if tlsOn {
		if o.CertFile == "" || o.KeyFile == "" {
			_ = ln.Close()
			return nil, errors.New("https needs both a certificate and a key file")
		}
		w, err := certwatcher.New(o.CertFile, o.KeyFile)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		if err := mgr.Add(w); err != nil {
			_ = ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, &tls.Config{GetCertificate: w.GetCertificate, MinVersion: tls.VersionTLS12})
	}
	return s, mgr.Add(&manager.Server{
		Name:            "ignition-server",
		Server:          &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second},
		Listener:        ln,
		ShutdownTimeout: ptr.To(5 * time.Second),
	})
}
