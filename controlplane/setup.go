package controlplane

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/controlplane/reconcilers/openshiftcontrolplane"
)

// Options tune the control-plane provider.
type Options struct {
	WatchFilterValue string
}

// Setup registers the provider's controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	return (&openshiftcontrolplane.Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("openshiftcontrolplane-controller"),
		WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}
