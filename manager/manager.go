package manager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	coresetup "sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/version"

	"github.com/metalshift/metalshift/baremetal"
	"github.com/metalshift/metalshift/bootstrap"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal"
)

// Name identifies the manager towards the API server.
const Name = "metalshift-manager"

// Options configure the hub manager.
type Options = component.Options

// Component is one part of the hub.
type Component = component.Component

// Components are the parts of the hub, in the order they register. A new
// component joins the hub with one line here.
var Components = []Component{
	component.CAPICore,
	{Name: "host-engine", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		e := opts.HostEngine
		if e.DeployListenAddr == "" {
			ctrl.LoggerFrom(ctx).Info("Host engine disabled: no deploy server address")
			return nil
		}
		return baremetal.Setup(ctx, mgr, baremetal.Options{DeployListenAddr: e.DeployListenAddr, DeployURL: e.DeployURL, SigningKey: e.SigningKey})
	}},
	{Name: "bootstrap-openshift", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		return bootstrap.Setup(ctx, mgr, bootstrap.Options{WatchFilterValue: opts.WatchFilterValue})
	}},
	{Name: "infrastructure-metal", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		return metal.Setup(ctx, mgr, metal.Options{WatchFilterValue: opts.WatchFilterValue})
	}},
}

// New returns a manager with every component registered. It fails when the
// API server is older than Cluster API supports.
func New(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if err := version.CheckKubernetesVersion(cfg, version.MinimumKubernetesVersion); err != nil {
		return nil, err
	}
	scheme, err := component.NewScheme()
	if err != nil {
		return nil, err
	}
	syncPeriod := opts.SyncPeriod
	if syncPeriod == 0 {
		syncPeriod = 10 * time.Minute
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   coresetup.ManagerCacheOptions(scheme, Name, opts.Namespace, syncPeriod),
		Client:                  coresetup.ManagerClientOptions(),
		Metrics:                 metricsserver.Options{BindAddress: orZero(opts.MetricsAddr)},
		HealthProbeBindAddress:  orZero(opts.HealthAddr),
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        leaderElectionID(opts.WatchFilterValue),
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
	}
	if opts.WebhookPort != 0 {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{
			Host: opts.WebhookHost, Port: opts.WebhookPort, CertDir: opts.WebhookCertDir,
			CertName: opts.WebhookCertName, KeyName: opts.WebhookKeyName,
		})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	for _, c := range Components {
		if err := c.Setup(ctx, mgr, opts); err != nil {
			return nil, fmt.Errorf("component %s: %w", c.Name, err)
		}
	}
	return mgr, nil
}

func orZero(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

func leaderElectionID(filter string) string {
	if filter == "" {
		return Name
	}
	return Name + "-" + filter
}
