package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/bootstrap/reconcilers/openshiftconfig"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/serving"
)

// Component is the OpenShift bootstrap provider as a part of the hub: it
// serves OpenShiftConfig and OpenShiftConfigTemplate, with the ignition
// server at --ignition-listen-address for configs too large for user data.
func Component() component.Component {
	var (
		o        ignitionserver.Config
		insecure bool
	)
	return component.Component{
		Name:        "bootstrap-openshift",
		AddToScheme: bootstrapv1.AddToScheme,
		CRDs:        []string{"crd/bases/bootstrap.cluster.x-k8s.io_*.yaml"},
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.ListenAddr, "ignition-listen-address", "", "Where the ignition server listens (serves Ignition configs too large for user data); empty disables it")
			fs.StringVar(&o.URL, "ignition-url", "", "How hosts reach the ignition server (default http(s)://<ignition-listen-address>)")
			fs.StringVar(&o.CertFile, "ignition-cert-file", "", "Serving certificate of the ignition server (https); read again when it changes")
			fs.StringVar(&o.KeyFile, "ignition-key-file", "", "Key of --ignition-cert-file; read again when it changes")
			fs.StringVar(&o.CAFile, "ignition-ca-file", "", "CA bundle hosts trust for the ignition server (https), put in the configs that point hosts at it; read again when it changes")
			fs.BoolVar(&insecure, "ignition-insecure-http", false, "Serve the ignition server over plain http, without --ignition-cert-file: for a lab only (tokens and configs cross the network in the clear)")
			fs.IntVar(&o.MaxUserDataBytes, "max-user-data-bytes", 0, "Largest Ignition config put in user data as is (default 64 KiB)")
			fs.DurationVar(&o.TokenTTL, "ignition-token-ttl", ignitionserver.DefaultTokenTTL,
				"How long the token of a served Ignition config is valid; a machine that boots later is refused (its config is re-signed while it waits for a host)")
			fs.DurationVar(&o.FetchWindow, "ignition-fetch-window", ignitionserver.DefaultFetchWindow,
				"How long after its first fetch a served Ignition config is served again (a retried first boot); later fetches are refused")
		},
		Complete: func(hub *component.Options) error {
			if o.TokenTTL <= 0 {
				return fmt.Errorf("--ignition-token-ttl must be positive, not %s", o.TokenTTL)
			}
			if o.FetchWindow <= 0 {
				return fmt.Errorf("--ignition-fetch-window must be positive, not %s", o.FetchWindow)
			}
			if o.ListenAddr != "" && len(hub.SigningKey) == 0 {
				return errors.New("--signing-key-file is required with --ignition-listen-address")
			}
			if o.ListenAddr == "" {
				return nil
			}
			// A certificate the machines' system roots trust needs no CA file.
			return serving.TLSFiles{CertFile: o.CertFile, KeyFile: o.KeyFile, CAFile: o.CAFile}.Check("ignition", insecure, false)
		},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			is := o
			is.SigningKey = hub.SigningKey
			return Setup(ctx, hub.Manager, Options{WatchFilterValue: hub.WatchFilterValue, IgnitionServer: is, Clock: hub.Clock})
		},
	}
}

// Options tune the bootstrap provider.
type Options struct {
	WatchFilterValue string

	// IgnitionServer serves configs too large for user data; without a
	// ListenAddr (or IgnitionListener) such configs are refused with a
	// condition.
	IgnitionServer ignitionserver.Config
	// IgnitionListener, when set, is the ignition server's listener (plain
	// TCP: the TLS files serve https on it); IgnitionServer.ListenAddr is
	// then not used.
	IgnitionListener net.Listener

	// Clock tells the ignition server the time its tokens are made and
	// checked at; nil means the real clock.
	Clock clock.PassiveClock

	// Budgets limit what one client may cost the ignition server; zero
	// fields are serving's defaults.
	Budgets serving.Budgets
}

// Setup registers the provider's controllers (and the ignition server)
// with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	r := &openshiftconfig.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: opts.WatchFilterValue,
		MaxUserDataBytes: opts.IgnitionServer.MaxUserDataBytes,
	}
	if opts.IgnitionServer.ListenAddr != "" || opts.IgnitionListener != nil {
		s, err := addIgnitionServer(mgr, opts)
		if err != nil {
			return fmt.Errorf("ignition server: %w", err)
		}
		r.IgnitionServer = s
	}
	return r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}

func addIgnitionServer(mgr ctrl.Manager, opts Options) (*ignitionserver.Server, error) {
	o, ln, budgets := opts.IgnitionServer, opts.IgnitionListener, opts.Budgets
	files := serving.TLSFiles{CertFile: o.CertFile, KeyFile: o.KeyFile, CAFile: o.CAFile}
	if ln != nil {
		o.ListenAddr = ln.Addr().String()
	}
	if o.URL == "" {
		o.URL = files.Scheme() + "://" + o.ListenAddr
	}
	// Secrets are read directly: Cluster API's manager keeps them out of the cache.
	s, err := ignitionserver.New(ignitionserver.Options{Client: mgr.GetClient(), Key: o.SigningKey, BaseURL: o.URL, CAFile: o.CAFile, TokenTTL: o.TokenTTL,
		FetchWindow: o.FetchWindow, Clock: opts.Clock, WatchFilterValue: opts.WatchFilterValue})
	if err != nil {
		return nil, err
	}
	// Every request carries a machine's token: failed ones are limited.
	srv, err := serving.NewServer(s.Handler(), serving.Options{Name: "ignition-server", Budgets: budgets})
	if err != nil {
		return nil, err
	}
	log := mgr.GetLogger().WithName("ignition-server")
	ln, err = serving.Listen(ln, o.ListenAddr, files, "ignition server", log)
	if err != nil {
		return nil, err
	}
	return s, mgr.Add(&manager.Server{Name: "ignition-server", Server: srv, Listener: ln, ShutdownTimeout: ptr.To(5 * time.Second)})
}
