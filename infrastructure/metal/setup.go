package metal

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal/reconcilers/metalcluster"
	"github.com/metalshift/metalshift/infrastructure/metal/reconcilers/metalmachine"
)

// Component is the bare-metal infrastructure provider as a part of the hub:
// it serves MetalCluster, MetalMachine and MetalMachineTemplate, claiming
// the host engine's BareMetalHosts.
func Component() component.Component {
	return component.Component{
		Name: "infrastructure-metal",
		AddToScheme: func(s *runtime.Scheme) error {
			if err := infrav1.AddToScheme(s); err != nil {
				return err
			}
			return metal3v1.AddToScheme(s) // the hosts it claims, also without the host engine's component
		},
		CRDs: []string{"crd/bases/infrastructure.cluster.x-k8s.io_metal*.yaml"},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return Setup(ctx, hub.Manager, Options{WatchFilterValue: hub.WatchFilterValue})
		},
	}
}

// Options tune the bare-metal infrastructure provider.
type Options struct {
	// WatchFilterValue restricts the controllers to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string
}

// Setup registers the provider's controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := (&metalcluster.Reconciler{
		Client:           mgr.GetClient(),
		WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10}); err != nil {
		return err
	}
	return (&metalmachine.Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}
