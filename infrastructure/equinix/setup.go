// Package equinix is the Equinix Metal infrastructure provider as a part of
// the hub: the EquinixMetalCluster, EquinixMetalMachine and
// EquinixMetalMachineTemplate CRDs and their admission webhooks. Its
// reconcilers (devices, elastic IPs, DNS records) are not written yet; its
// client of the Equinix Metal API is package metalclient.
package equinix

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/equinix/webhooks"
)

// ComponentName names the component (manager --components).
const ComponentName = "infrastructure-equinix"

// Component is the Equinix Metal infrastructure provider as a part of the
// hub. Today it serves the provider's CRDs and validates their objects when
// the manager serves webhooks; nothing reconciles them yet.
func Component() component.Component {
	return component.Component{
		Name:        ComponentName,
		AddToScheme: infrav1.AddToScheme,
		CRDs:        []string{"crd/bases/infrastructure.cluster.x-k8s.io_equinixmetal*.yaml"},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return Setup(ctx, hub.Manager, Options{Webhooks: hub.Webhooks})
		},
	}
}

// Options configure the Equinix Metal provider.
type Options struct {
	// Webhooks serves the provider's admission webhooks on the manager's
	// webhook server; set it when the manager serves webhooks.
	Webhooks bool
}

// Setup registers the provider with mgr: its webhooks, with opts.Webhooks.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if !opts.Webhooks {
		return nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Equinix Metal provider: admission webhooks only, no reconcilers yet")
	return webhooks.SetupWithManager(mgr)
}
