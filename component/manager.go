package component

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	coresetup "sigs.k8s.io/cluster-api/core/setup"
)

// NewManager returns a manager named name, configured as Cluster API's core
// manager expects (its cache and client options), with components
// registered. The hub manager and the test environment both build theirs here.
func NewManager(ctx context.Context, cfg *rest.Config, name string, opts Options, components []Component) (ctrl.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	syncPeriod := opts.SyncPeriod
	if syncPeriod == 0 {
		syncPeriod = 10 * time.Minute
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   coresetup.ManagerCacheOptions(scheme, name, opts.Namespace, syncPeriod),
		Client:                  coresetup.ManagerClientOptions(),
		Metrics:                 metricsserver.Options{BindAddress: orZero(opts.MetricsAddr)},
		HealthProbeBindAddress:  orZero(opts.HealthAddr),
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        leaderElectionID(name, opts.WatchFilterValue),
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
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
	for _, c := range components {
		if err := c.Setup(ctx, mgr, opts); err != nil {
			return nil, fmt.Errorf("component %s: %w", c.Name, err)
		}
	}
	return mgr, nil
}

// http1Only keeps the webhook server off HTTP/2, as Cluster API's managers
// do by default (HTTP/2 rapid-reset and stream CVEs; the kube-apiserver
// speaks HTTP/1.1 to webhooks just as well), and lets a stopping manager
// close its webhook connections at once.
func http1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
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
