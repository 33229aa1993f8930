package capicore

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	coresetup "sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/core/webhooks/conversion"
	"sigs.k8s.io/cluster-api/util/index"
)

// Grace periods of the connection to a workload cluster, as the upstream
// core manager's defaults: after remoteConnectionGracePeriod without a
// successful probe the Cluster's RemoteConnectionProbe condition goes False;
// after remoteConditionsGracePeriod remote conditions (NodeHealthy ...) go
// Unknown.
const (
	remoteConnectionGracePeriod = 50 * time.Second
	remoteConditionsGracePeriod = 5 * time.Minute
)

// ControllerName is the name the core controllers identify with towards
// the API servers (user agent, field manager of the informers).
const ControllerName = "metalshift-capi-core"

// Options tune the core controllers.
type Options struct {
	// WatchFilterValue, when set, restricts the controllers to objects
	// labelled cluster.x-k8s.io/watch-filter=<value> (sharding).
	WatchFilterValue string

	// Concurrency is the number of workers per controller; 0 means 10.
	Concurrency int

	// Reconcilers runs the core controllers.
	Reconcilers bool

	// Webhooks serves the core admission and conversion webhooks on the
	// manager's webhook server.
	Webhooks bool

	// ConnectionRetryInterval is how long the ClusterCache waits before it
	// tries again to connect to a workload cluster; 0 keeps upstream's 30s.
	// A local hub, where a cluster's API comes up while we watch, uses less.
	ConnectionRetryInterval time.Duration
}

// Setup registers the core indexes and ClusterCache and, as asked, the
// reconcilers and webhooks with mgr. The manager must use the cache and client
// options of NewManagerOptions.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	workers := opts.Concurrency
	if workers == 0 {
		workers = 10
	}
	concurrency := controller.Options{MaxConcurrentReconciles: workers}

	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("adding Cluster API indexes: %w", err)
	}
	clusterCache, err := setupClusterCache(ctx, mgr, opts.WatchFilterValue, concurrency)
	if err != nil {
		return err
	}
	if opts.ConnectionRetryInterval > 0 {
		// Not part of the ClusterCache interface, but exported by its implementation.
		if cc, ok := clusterCache.(interface{ SetConnectionCreationRetryInterval(time.Duration) }); ok {
			cc.SetConnectionCreationRetryInterval(opts.ConnectionRetryInterval)
		}
	}
	if opts.Reconcilers {
		if err := setupReconcilers(ctx, mgr, clusterCache, opts.WatchFilterValue, concurrency); err != nil {
			return err
		}
	}
	if opts.Webhooks {
		return setupWebhooks(mgr, clusterCache)
	}
	return nil
}

func setupClusterCache(ctx context.Context, mgr ctrl.Manager, filter string, concurrency controller.Options) (clustercache.ClusterCache, error) {
	secretClient, err := coresetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("creating the Secret caching client: %w", err)
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     secretClient,
		Cache:            coresetup.ClusterCacheCacheOptions(),
		Client:           coresetup.ClusterCacheClientOptions(ControllerName, 20, 30),
		WatchFilterValue: filter,
	}, concurrency)
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	return cc, nil
}

func setupReconcilers(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, filter string, concurrency controller.Options) error {
	c, r := mgr.GetClient(), mgr.GetAPIReader()
	reconcilers := []struct {
		name  string
		setup func() error
	}{
		{"Cluster", func() error {
			return (&cluster.Reconciler{
				Client: c, APIReader: r, ClusterCache: cc, WatchFilterValue: filter,
				RemoteConnectionGracePeriod: remoteConnectionGracePeriod,
			}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
		{"Machine", func() error {
			return (&machine.Reconciler{
				Client: c, APIReader: r, ClusterCache: cc, WatchFilterValue: filter,
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
			}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
		{"MachineSet", func() error {
			return (&machineset.Reconciler{
				Client: c, APIReader: r, ClusterCache: cc, WatchFilterValue: filter,
				PreflightChecks: sets.Set[clusterv1.MachineSetPreflightCheck]{},
			}).SetupWithManager(ctx, mgr, concurrency)
		}},
		{"MachineDeployment", func() error {
			return (&machinedeployment.Reconciler{Client: c, APIReader: r, WatchFilterValue: filter}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
		{"MachineHealthCheck", func() error {
			return (&machinehealthcheck.Reconciler{Client: c, ClusterCache: cc, WatchFilterValue: filter}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
	}
	for _, rec := range reconcilers {
		if err := rec.setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", rec.name, err)
		}
	}
	return nil
}

func setupWebhooks(mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	conversion.SetAPIVersionGetter(func(ctx context.Context, gk schema.GroupKind) (string, error) {
		return apiVersionFor(ctx, mgr.GetClient(), gk)
	})
	webhooks := []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&admission.Cluster{Client: mgr.GetClient(), ClusterCacheReader: cc},
		&admission.ClusterClass{Client: mgr.GetClient()},
		&admission.Machine{},
		&admission.MachineSet{},
		&admission.MachineDeployment{},
		&admission.MachineDrainRule{},
		&admission.MachineHealthCheck{},
		&admission.MachinePool{},
		&admission.ClusterResourceSet{},
		&admission.ClusterResourceSetBinding{},
		&admission.ExtensionConfig{},
		&admission.IPAddress{Client: mgr.GetAPIReader()},
		&admission.IPAddressClaim{},
	}
	for _, w := range webhooks {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %T webhook: %w", w, err)
		}
	}
	return nil
}
