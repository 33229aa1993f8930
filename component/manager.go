package component

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	coresetup "sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/version"

	"github.com/metalshift/metalshift/internal/kubeconfig"
	"github.com/metalshift/metalshift/internal/shard"
)

// ControllerConfig is what every manager's controllers share: the work
// queue of client-go, not controller-runtime's priority queue, which in
// v0.24.1 can deadlock when its manager stops (kubernetes-sigs/
// controller-runtime#3538, fixed after that release): the queue's handler
// holds its lock while handing an item to a worker that already left, the
// workers finishing items wait for that lock, and the manager misses its
// graceful shutdown period. Managers built elsewhere (tests) start from it.
func ControllerConfig() config.Controller {
	return config.Controller{UsePriorityQueue: ptr.To(false)}
}

// NewManager returns a manager named name, configured as Cluster API's core
// manager expects (its cache and client options), with the hub's shared
// services (Hub) created once and every component registered, in order.
// It fails when the API server is older than Cluster API supports. The hub
// manager and the test environment both build theirs here; options read
// from flags must have gone through Complete.
func NewManager(ctx context.Context, cfg *rest.Config, name string, opts Options, components []Component) (ctrl.Manager, error) {
	if err := version.CheckKubernetesVersion(cfg, version.MinimumKubernetesVersion); err != nil {
		return nil, err
	}
	scheme, err := NewScheme(components...)
	if err != nil {
		return nil, err
	}
	syncPeriod := opts.SyncPeriod
	if syncPeriod == 0 {
		syncPeriod = 10 * time.Minute
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   coresetup.ManagerCacheOptions(scheme, informerName(name, opts), opts.Namespace, syncPeriod),
		Client:                  coresetup.ManagerClientOptions(),
		Metrics:                 metricsserver.Options{BindAddress: orZero(opts.MetricsAddr)},
		HealthProbeBindAddress:  orZero(opts.HealthAddr),
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        leaderElectionID(name, opts.WatchFilterValue),
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		Controller:              ControllerConfig(),
	}
	shardCache(&mgrOpts.Cache, opts.WatchFilterValue, components)
	if opts.RestartableInProcess {
		mgrOpts.Controller.SkipNameValidation = ptr.To(true)
	}
	if opts.WebhookPort != 0 {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{
			Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir,
			CertName: opts.WebhookCertName, KeyName: opts.WebhookKeyName,
			TLSOpts: []func(*tls.Config){http1Only},
		})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the webhook server serves, when it is one of the manager's.
	ready := healthz.Ping
	if opts.WebhookPort != 0 {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("webhook", ready); err != nil {
		return nil, err
	}
	hub := &Hub{
		Manager: mgr, Clock: opts.Clock,
		Namespace: opts.Namespace, WatchFilterValue: opts.WatchFilterValue,
		Webhooks: opts.WebhookPort != 0, SigningKey: opts.SigningKey,
		LiveImageDir: opts.LiveImageDir,
	}
	if hub.Clock == nil {
		hub.Clock = clock.RealClock{}
	}
	if slices.ContainsFunc(components, func(c Component) bool { return c.UsesClusterCache }) {
		if hub.ClusterCache, err = newClusterCache(ctx, mgr, opts); err != nil {
			return nil, err
		}
	}
	for _, c := range components {
		if err := c.Setup(ctx, hub); err != nil {
			return nil, fmt.Errorf("component %s: %w", c.Name, err)
		}
	}
	return mgr, nil
}

// newClusterCache creates the manager's ClusterCache as Cluster API's core
// manager does. It reads kubeconfig Secrets through a client of the
// manager's cache, which holds only Secrets labelled with a cluster name,
// and sanitizes them: a Cluster's kubeconfig is written by whoever may
// write Secrets in its namespace, and the ClusterCache loads it with
// client-go, which would read files of the hub (tokenFile, certificate
// paths) or connect through a proxy it names (it refuses exec plugins and
// auth providers itself).
func newClusterCache(ctx context.Context, mgr ctrl.Manager, opts Options) (clustercache.ClusterCache, error) {
	secretClient, err := coresetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("creating the Secret caching client: %w", err)
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     kubeconfig.SanitizingSecrets{Reader: secretClient},
		Cache:            coresetup.ClusterCacheCacheOptions(),
		Client:           coresetup.ClusterCacheClientOptions(CAPIControllerName, 20, 30),
		WatchFilterValue: opts.WatchFilterValue,
	}, controller.Options{MaxConcurrentReconciles: capiConcurrency})
	if err != nil {
		return nil, fmt.Errorf("creating the ClusterCache: %w", err)
	}
	if opts.WorkloadConnectionRetryInterval > 0 {
		// Not part of the ClusterCache interface, but exported by its implementation.
		if r, ok := cc.(interface{ SetConnectionCreationRetryInterval(time.Duration) }); ok {
			r.SetConnectionCreationRetryInterval(opts.WorkloadConnectionRetryInterval)
		}
	}
	return drainingClusterCache{cc}, nil
}

// drainingClusterCache keeps the ClusterCache from blocking a stopping
// manager. Cluster API's ClusterCache sends connect and disconnect events
// to the controllers that asked for a cluster source on unbuffered
// channels, without looking at its context, while it holds a lock; once
// those controllers stop reading (the manager is stopping), a Cluster
// connected or deleted in that moment blocks its Reconcile for good, and
// the manager misses its graceful shutdown period (30s) — a leader hands
// over that much later. Its sources keep reading until the process ends;
// what they read then goes to stopped queues, which drop it.
type drainingClusterCache struct{ clustercache.ClusterCache }

func (c drainingClusterCache) GetClusterSource(controllerName string, mapFunc func(context.Context, client.Object) []ctrl.Request,
	opts ...clustercache.GetClusterSourceOption) source.Source {
	return drainingSource{c.ClusterCache.GetClusterSource(controllerName, mapFunc, opts...)}
}

type drainingSource struct{ source.Source }

func (s drainingSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.Source.Start(context.WithoutCancel(ctx), q)
}

// http1Only keeps the webhook server off HTTP/2, as Cluster API's managers
// do by default (HTTP/2 rapid-reset and stream CVEs; the kube-apiserver
// speaks HTTP/1.1 to webhooks just as well), and lets a stopping manager
// close its webhook connections at once.
func http1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
}

// instances counts the managers a process started, for informerName.
var instances atomic.Int64

// informerName names the manager's informers (client-go's informer
// metrics): name, unique in the process even when it runs several managers
// (RestartableInProcess).
func informerName(name string, opts Options) string {
	if !opts.RestartableInProcess {
		return name
	}
	return fmt.Sprintf("%s-%d", name, instances.Add(1))
}

func orZero(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

func leaderElectionID(name, filter string) string {
	if filter == "" {
		return name
	}
	return name + "-" + filter
}

// shardCache restricts the cache to the shard of value for the
// components' Sharded kinds: the objects of other shards and unlabelled
// ones are neither held nor sent to this manager.
func shardCache(o *cache.Options, value string, components []Component) {
	if value == "" {
		return
	}
	sel := labels.SelectorFromSet(labels.Set{shard.Label: value})
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	for _, c := range components {
		for _, obj := range c.Sharded {
			o.ByObject[obj] = cache.ByObject{Label: sel}
		}
	}
}
