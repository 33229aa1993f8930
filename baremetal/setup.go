package baremetal

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/baremetal/deployserver"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner/factory"
	"github.com/metalshift/metalshift/baremetal/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/baremetal/webhooks"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/imageservice"
)

// Component is the host engine as a part of the hub: it serves the metal3.io
// API (BareMetalHost, PreprovisioningImage), with its deploy server at
// --deploy-listen-address. Without that flag the engine does not run, and
// the manager only validates hosts (when it serves webhooks).
func Component() component.Component {
	var o Options
	return component.Component{
		Name:        "host-engine",
		AddToScheme: metal3v1.AddToScheme,
		CRDs:        []string{"crd/bases/metal3.io_*.yaml"},
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.DeployListenAddr, "deploy-listen-address", "", "Where the host engine's deploy server listens (hosts fetch deploy images and their agents report there); empty disables the host engine")
			fs.StringVar(&o.DeployURL, "deploy-url", "", "How hosts reach the deploy server (default http://<deploy-listen-address>)")
		},
		Complete: func(hub *component.Options) error {
			if o.DeployListenAddr != "" && len(hub.SigningKey) == 0 {
				return errors.New("--signing-key-file is required with --deploy-listen-address")
			}
			return nil
		},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			if o.DeployListenAddr == "" {
				ctrl.LoggerFrom(ctx).Info("Host engine disabled: no deploy server address")
				if hub.Webhooks { // hosts are still validated
					return (&webhooks.BareMetalHost{}).SetupWebhookWithManager(hub.Manager)
				}
				return nil
			}
			opts := o
			opts.SigningKey, opts.Clock, opts.LiveImageDir = hub.SigningKey, hub.Clock, hub.LiveImageDir
			opts.Namespace, opts.WatchFilterValue, opts.Webhooks = hub.Namespace, hub.WatchFilterValue, hub.Webhooks
			return Setup(ctx, hub.Manager, opts)
		},
	}
}

// Options configure the host engine.
type Options struct {
	// DeployListenAddr is where the deploy server listens, e.g. 127.0.0.1:6180.
	DeployListenAddr string
	// DeployURL is how hosts reach the deploy server; defaults to
	// http://<DeployListenAddr>.
	DeployURL string
	// SigningKey signs deploy URLs and agent tokens; keep it across restarts.
	SigningKey []byte
	// LiveImageDir holds the live images the deploy server streams; empty
	// means the light images, which only simulated machines boot.
	LiveImageDir string
	// Provisioners overrides the BMC drivers (tests).
	Provisioners provisioner.Factory
	// BackoffBase is the first retry delay after an error; 0 means 2s.
	BackoffBase time.Duration
	// Concurrency is the number of hosts reconciled at once; 0 means 20.
	Concurrency int
	// PowerPollInterval is how often stable hosts' power is checked; 0 means 60s.
	PowerPollInterval time.Duration
	// Clock tells the time to the reconciler and the deploy server; nil
	// means the real clock.
	Clock clock.Clock
	// Namespace restricts the engine to hosts in one namespace, as the
	// manager's cache is; empty means every namespace.
	Namespace string
	// WatchFilterValue restricts the engine to hosts labelled
	// cluster.x-k8s.io/watch-filter=<value>; empty means every host.
	WatchFilterValue string
	// Webhooks serves the BareMetalHost admission webhook on the manager's
	// webhook server; set it when the manager serves webhooks.
	Webhooks bool
}

// Setup starts the deploy server and registers the BareMetalHost reconciler
// (and webhook, with opts.Webhooks).
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Webhooks {
		if err := (&webhooks.BareMetalHost{}).SetupWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	if opts.DeployListenAddr == "" {
		return errors.New("the host engine needs a deploy server address")
	}
	if opts.DeployURL == "" {
		opts.DeployURL = "http://" + opts.DeployListenAddr
	}
	if opts.Provisioners == nil {
		opts.Provisioners = factory.New(factory.Options{})
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 20
	}
	// The manager's client serves hosts from the cache, which agents polling
	// every few seconds would otherwise turn into API reads, and reads Secrets
	// directly (Cluster API's client options keep them out of the cache).
	var images *imageservice.Images
	if opts.LiveImageDir != "" {
		var err error
		if images, err = imageservice.LoadImages(opts.LiveImageDir); err != nil {
			return fmt.Errorf("loading the live images (build them with `make images`): %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Serving the live images", "dir", opts.LiveImageDir)
	}
	ds, err := deployserver.New(deployserver.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("metalshift-deploy-server"),
		Key: opts.SigningKey, BaseURL: opts.DeployURL, Clock: opts.Clock, Images: images})
	if err != nil {
		return err
	}
	if err := mgr.Add(&manager.Server{
		Name:            "deploy-server",
		Server:          &http.Server{Addr: opts.DeployListenAddr, Handler: ds.Handler(), ReadHeaderTimeout: 10 * time.Second},
		ShutdownTimeout: ptr.To(5 * time.Second),
	}); err != nil {
		return err
	}
	secrets, err := secretMetadataCache(mgr, opts.Namespace)
	if err != nil {
		return err
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return err
	}
	return (&baremetalhost.Reconciler{
		Client:            mgr.GetClient(),
		Direct:            direct,
		APIReader:         mgr.GetAPIReader(),
		Recorder:          mgr.GetEventRecorder("metalshift-host-engine"),
		Provisioners:      opts.Provisioners,
		Deploy:            ds,
		Clock:             opts.Clock,
		BackoffBase:       opts.BackoffBase,
		PowerPollInterval: opts.PowerPollInterval,
		WatchFilterValue:  opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, secrets, controller.Options{MaxConcurrentReconciles: opts.Concurrency})
}

// secretMetadataCache watches every Secret in namespace (all when empty),
// keeping no data, so that a fixed credentials Secret wakes its hosts. (The
// manager's own cache only holds Cluster API's labelled Secrets.)
func secretMetadataCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	var namespaces map[string]cache.Config
	if namespace != "" {
		namespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: namespaces,
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Transform: func(in any) (any, error) {
			if s, ok := in.(*corev1.Secret); ok {
				s.Data, s.StringData, s.ManagedFields = nil, nil, nil
			}
			return in, nil
		}}},
	})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}
