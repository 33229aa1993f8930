package manager

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"sigs.k8s.io/cluster-api/version"

	"github.com/metalshift/metalshift/baremetal"
	"github.com/metalshift/metalshift/bootstrap"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/controlplane"
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
		e, webhooks := opts.HostEngine, opts.WebhookPort != 0
		if e.DeployListenAddr == "" {
			ctrl.LoggerFrom(ctx).Info("Host engine disabled: no deploy server address")
			if webhooks { // hosts are still validated
				return component.HostWebhooks.Setup(ctx, mgr, opts)
			}
			return nil
		}
		return baremetal.Setup(ctx, mgr, baremetal.Options{DeployListenAddr: e.DeployListenAddr, DeployURL: e.DeployURL, SigningKey: e.SigningKey,
			Webhooks: webhooks, WatchFilterValue: opts.WatchFilterValue})
	}},
	{Name: "bootstrap-openshift", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		return bootstrap.Setup(ctx, mgr, bootstrap.Options{WatchFilterValue: opts.WatchFilterValue, IgnitionServer: opts.IgnitionServer})
	}},
	{Name: "controlplane-openshift", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		return controlplane.Setup(ctx, mgr, controlplane.Options{WatchFilterValue: opts.WatchFilterValue})
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
	mgr, err := component.NewManager(ctx, cfg, Name, opts, Components)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
