package hostengine

import (
	"context"
	"errors"
	"fmt"
	"net"
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

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine/deployserver"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner/factory"
	"github.com/metalshift/metalshift/hostengine/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/hostengine/webhooks"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/serving"
)

// Component is the host engine as a part of the hub: it serves the metal3.io
// API (BareMetalHost, PreprovisioningImage), with its deploy server at
// --deploy-listen-address. Without that flag the engine does not run, and
// the manager only validates hosts (when it serves webhooks).
func Component() component.Component {
	var (
		o           Options
		bmcNetworks []string
		insecure    bool
	)
	return component.Component{
		Name:        "host-engine",
		AddToScheme: metal3v1.AddToScheme,
		CRDs:        []string{"crd/bases/metal3.io_*.yaml"},
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.DeployListenAddr, "deploy-listen-address", "", "Where the host engine's deploy server listens (hosts fetch deploy images and their agents report there); empty disables the host engine")
			fs.StringVar(&o.DeployURL, "deploy-url", "", "How hosts reach the deploy server (default https://<deploy-listen-address>, http:// with --deploy-insecure-http)")
			fs.StringVar(&o.TLS.CertFile, "deploy-cert-file", "", "Serving certificate of the deploy server (https); read again when it changes")
			fs.StringVar(&o.TLS.KeyFile, "deploy-key-file", "", "Key of --deploy-cert-file; read again when it changes")
			fs.StringVar(&o.TLS.CAFile, "deploy-ca-file", "", "CA bundle hosts trust for the deploy server, put in their boot configuration; read again when it changes")
			fs.BoolVar(&insecure, "deploy-insecure-http", false, "Serve the deploy server over plain http, without --deploy-cert-file: for a lab only (agent tokens, user data and network data cross the network in the clear)")
			fs.StringVar(&o.BootListenAddr, "deploy-boot-listen-address", "", "Where the deploy server also serves plain http for network-booting firmware that cannot verify its certificate (iPXE): "+
				"only boot scripts by MAC address, the deploy kernel and initramfs, and hosts' boot configuration initrds; empty disables it")
			fs.StringVar(&o.BootURL, "deploy-boot-url", "", "How network-booting firmware reaches --deploy-boot-listen-address (default http://<deploy-boot-listen-address>); point DHCP's boot file at <url>/boot/by-mac/${mac}")
			fs.BoolVar(&o.BMCEgress.AllowLoopback, "bmc-allow-loopback", false, "Let BMC addresses reach loopback (127.0.0.0/8, ::1), as simulated BMCs on the hub's own machine need; refused by default")
			fs.StringSliceVar(&bmcNetworks, "bmc-allowed-networks", nil, "Networks (CIDRs) BMC addresses may reach although the BMC egress policy refuses them by default (loopback, link-local, cloud metadata, unspecified, multicast), e.g. 169.254.10.0/24 for BMCs on a link-local network")
		},
		Complete: func(hub *component.Options) error {
			if o.DeployListenAddr == "" {
				return nil
			}
			if len(hub.SigningKey) == 0 {
				return errors.New("--signing-key-file is required with --deploy-listen-address")
			}
			allowed, err := egress.ParsePrefixes(bmcNetworks)
			if err != nil {
				return fmt.Errorf("--bmc-allowed-networks: %w", err)
			}
			o.BMCEgress.Allowed = allowed
			return o.TLS.Check("deploy", insecure, true)
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
	// http(s)://<DeployListenAddr>.
	DeployURL string
	// DeployListener, when set, is the deploy server's listener (plain
	// TCP: TLS serves https on it); DeployListenAddr is then not used.
	DeployListener net.Listener
	// TLS serves the deploy server over https; its CA goes into hosts'
	// boot configuration, for the agent to verify the server. Without a
	// certificate the server speaks plain http (which the manager's flags
	// allow only with --deploy-insecure-http).
	TLS serving.TLSFiles
	// BootListenAddr (or BootListener), when set, serves plain http for
	// network-booting firmware that cannot verify the deploy server
	// (deployserver.BootHandler); BootURL is how firmware reaches it,
	// default http://<BootListenAddr>.
	BootListenAddr, BootURL string
	BootListener            net.Listener
	// SigningKey signs deploy URLs and agent tokens; keep it across restarts.
	SigningKey []byte
	// LiveImageDir holds the live images the deploy server streams; empty
	// means the light images, which only simulated machines boot.
	LiveImageDir string
	// BMCEgress is where BMC connections may go; the zero value refuses
	// loopback, link-local, cloud metadata and the like (egress.Policy).
	// Ignored when Provisioners is set.
	BMCEgress egress.Policy
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
	// Budgets limit what one client may cost the deploy server; zero
	// fields are serving's defaults.
	Budgets serving.Budgets
}

// Setup starts the deploy server and registers the BareMetalHost reconciler
// (and webhook, with opts.Webhooks).
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Webhooks {
		if err := (&webhooks.BareMetalHost{}).SetupWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	if opts.DeployListener != nil {
		opts.DeployListenAddr = opts.DeployListener.Addr().String()
	}
	if opts.DeployListenAddr == "" {
		return errors.New("the host engine needs a deploy server address")
	}
	if opts.DeployURL == "" {
		opts.DeployURL = opts.TLS.Scheme() + "://" + opts.DeployListenAddr
	}
	if opts.Provisioners == nil {
		opts.Provisioners = factory.New(factory.Options{Egress: opts.BMCEgress})
		ctrl.LoggerFrom(ctx).Info("BMC egress policy", "policy", opts.BMCEgress.String())
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
	// One record of the writes of hosts for the engine and the deploy
	// server: the server reads a host whose cached copy is older than
	// either's last write from the API before it writes the host.
	writes := reconciler.NewWrites(&metal3v1.BareMetalHost{})
	ds, err := newDeployServer(mgr, opts, images, writes)
	if err != nil {
		return err
	}
	if err := addDeployServers(mgr, ds, opts); err != nil {
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
		Writes:            writes,
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

// newDeployServer makes the deploy server, handing hosts the CA of its
// https.
func newDeployServer(mgr ctrl.Manager, opts Options, images *imageservice.Images, writes *reconciler.Writes) (*deployserver.Server, error) {
	var ca *serving.CA
	if opts.TLS.Enabled() && opts.TLS.CAFile != "" {
		var err error
		if ca, err = serving.NewCA(opts.TLS.CAFile, "deploy server", mgr.GetLogger().WithName("deploy-server")); err != nil {
			return nil, fmt.Errorf("the deploy server's CA: %w", err)
		}
	}
	return deployserver.New(deployserver.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("metalshift-deploy-server"),
		Key: opts.SigningKey, BaseURL: opts.DeployURL, CA: ca, Clock: opts.Clock, Images: images, WatchFilterValue: opts.WatchFilterValue,
		TokenStatus: baremetalhost.SetTokenCondition, Writes: writes})
}

// addDeployServers adds the deploy server, and its plain http boot
// listener when there is one, to mgr.
func addDeployServers(mgr ctrl.Manager, ds *deployserver.Server, opts Options) error {
	log := mgr.GetLogger().WithName("deploy-server")
	srv, err := serving.NewServer(ds.Handler(), serving.Options{Name: "deploy-server", Budgets: opts.Budgets, Unauthenticated: deployUnauthenticated, Log: log})
	if err != nil {
		return err
	}
	ln, err := serving.Listen(opts.DeployListener, opts.DeployListenAddr, opts.TLS, "deploy server", log)
	if err != nil {
		return err
	}
	if err := mgr.Add(&manager.Server{Name: "deploy-server", Server: srv, Listener: ln, ShutdownTimeout: ptr.To(5 * time.Second)}); err != nil {
		return err
	}
	boot := opts.BootListener
	if boot == nil && opts.BootListenAddr == "" {
		return nil
	}
	if boot == nil {
		if boot, err = net.Listen("tcp", opts.BootListenAddr); err != nil {
			return err
		}
	}
	bootURL := opts.BootURL
	if bootURL == "" {
		bootURL = "http://" + boot.Addr().String()
	}
	// Every request of firmware's is unauthenticated.
	bs, err := serving.NewServer(ds.BootHandler(bootURL), serving.Options{Name: "deploy-boot-server", Budgets: opts.Budgets,
		Unauthenticated: func(*http.Request) bool { return true }, Log: log})
	if err != nil {
		return err
	}
	return mgr.Add(&manager.Server{Name: "deploy-boot-server", Server: bs, Listener: boot, ShutdownTimeout: ptr.To(5 * time.Second)})
}

// deployUnauthenticated are the deploy server's requests without an
// agent's token, limited per source: images by signed URL, boot scripts
// by MAC address, lookups by an image's credential, metal cloud boots by
// signed URL.
var deployUnauthenticated = serving.Matching("GET /images/", "GET "+deployserver.PXEPath, "POST "+deployapi.LookupPath, "GET /metalcloud/")

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
