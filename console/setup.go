package console

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/serving"
)

// Options configure the console's server.
type Options struct {
	// ListenAddr is where the console listens; empty disables it.
	ListenAddr string
	// Listener, when set, is the server's listener (plain TCP: TLS
	// serves https on it); ListenAddr is then not used.
	Listener net.Listener
	// TLS serves the console over https (its certificate and key).
	TLS serving.TLSFiles
	// SessionTTL is how long a sign-in lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
}

// Component is the web console as a part of the hub: an HTTP(S) server at
// --console-listen-address, off by default. It registers no controller and
// reads nothing with the manager's credentials: only the API server's
// address and CA are taken from the manager's configuration.
func Component() component.Component {
	var (
		o        Options
		insecure bool
	)
	return component.Component{
		Name: "console",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.ListenAddr, "console-listen-address", "", "Where the web console listens (e.g. :8443); empty disables it")
			fs.StringVar(&o.TLS.CertFile, "console-cert-file", "", "Serving certificate of the console (https); read again when it changes")
			fs.StringVar(&o.TLS.KeyFile, "console-key-file", "", "Key of --console-cert-file; read again when it changes")
			fs.BoolVar(&insecure, "console-insecure-http", false, "Serve the console over plain http, without --console-cert-file: only behind a TLS-terminating proxy or on loopback (session cookies and tokens cross the network)")
			fs.DurationVar(&o.SessionTTL, "console-session-ttl", DefaultSessionTTL, "How long a console sign-in lasts")
		},
		Complete: func(*component.Options) error {
			if o.ListenAddr == "" {
				return nil
			}
			return o.TLS.Check("console", insecure, false)
		},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			if o.ListenAddr == "" && o.Listener == nil {
				ctrl.LoggerFrom(ctx).Info("Console disabled: no --console-listen-address")
				return nil
			}
			return Setup(hub, o)
		},
	}
}

// Setup adds the console's server to the hub's manager.
func Setup(hub *component.Hub, o Options) error {
	log := hub.Manager.GetLogger().WithName("console")
	srv, err := New(Config{API: hub.Manager.GetConfig(), SessionTTL: o.SessionTTL, Clock: hub.Clock, Log: log})
	if err != nil {
		return err
	}
	ln, err := serving.Listen(o.Listener, o.ListenAddr, o.TLS, "console", log)
	if err != nil {
		return err
	}
	// No write timeout: the pages' event streams stay open.
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	hs.RegisterOnShutdown(srv.Close)
	return hub.Manager.Add(&manager.Server{Name: "console", Server: hs, Listener: ln, ShutdownTimeout: ptr.To(5 * time.Second)})
}
