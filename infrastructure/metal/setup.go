package metal

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/infrastructure/metal/reconcilers/metalcluster"
)

// Options tune the bare-metal infrastructure provider.
type Options struct {
	// WatchFilterValue restricts the controllers to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string
}

// Setup registers the provider's controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	return (&metalcluster.Reconciler{
		Client:           mgr.GetClient(),
		WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}
