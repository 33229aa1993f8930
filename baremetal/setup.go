package baremetal

import (
	"context"
	"errors"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/metalshift/metalshift/baremetal/deployserver"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner/factory"
	"github.com/metalshift/metalshift/baremetal/reconcilers/baremetalhost"
	"github.com/metalshift/metalshift/baremetal/webhooks"
)

// Options configure the host engine.
type Options struct {
	// DeployListenAddr is where the deploy server listens, e.g. 127.0.0.1:6180.
	DeployListenAddr string
	// DeployURL is how hosts reach the deploy server; defaults to
	// http://<DeployListenAddr>.
	DeployURL string
	// SigningKey signs deploy URLs and agent tokens; keep it across restarts.
	SigningKey []byte
	// Provisioners overrides the BMC drivers (tests).
	Provisioners provisioner.Factory
	// BackoffBase is the first retry delay after an error; 0 means 2s.
	BackoffBase time.Duration
	// Concurrency is the number of hosts reconciled at once; 0 means 20.
	Concurrency int
	// PowerPollInterval is how often stable hosts' power is checked; 0 means 60s.
	PowerPollInterval time.Duration
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
	ds, err := deployserver.New(deployserver.Options{Client: mgr.GetClient(), Key: opts.SigningKey, BaseURL: opts.DeployURL})
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
	secrets, err := secretMetadataCache(mgr)
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
		BackoffBase:       opts.BackoffBase,
		PowerPollInterval: opts.PowerPollInterval,
		WatchFilterValue:  opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, secrets, controller.Options{MaxConcurrentReconciles: opts.Concurrency})
}

// secretMetadataCache watches every Secret, keeping no data, so that a
// fixed credentials Secret wakes its hosts. (The manager's own cache only
// holds Cluster API's labelled Secrets.)
func secretMetadataCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
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
