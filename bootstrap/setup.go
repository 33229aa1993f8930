package bootstrap

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/bootstrap/reconcilers/openshiftconfig"
)

// Options tune the bootstrap provider.
type Options struct {
	WatchFilterValue string
}

// Setup registers the provider's controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	return (&openshiftconfig.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}
