package controlplane

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/controlplane/reconcilers/openshiftcontrolplane"
)

// Component is the OpenShift control-plane provider as a part of the hub:
// it serves OpenShiftControlPlane, creates the OpenShiftConfigs of its
// Machines, and reads the installed cluster's
// config.openshift.io API (ClusterVersion, ClusterOperators) through
// workload clients, which share the hub's scheme.
func Component() component.Component {
	return component.Component{
		Name: "controlplane-openshift",
		AddToScheme: func(s *runtime.Scheme) error {
			if err := controlplanev1.AddToScheme(s); err != nil {
				return err
			}
			// The bootstrap Machine's OpenShiftConfig, which it creates;
			// the bootstrap provider may run in another process.
			if err := bootstrapv1.AddToScheme(s); err != nil {
				return err
			}
			return configv1.AddToScheme(s)
		},
		CRDs: []string{"crd/bases/controlplane.cluster.x-k8s.io_*.yaml"},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return Setup(ctx, hub.Manager, Options{WatchFilterValue: hub.WatchFilterValue, ClusterCache: hub.ClusterCache, Clock: hub.Clock})
		},
		UsesClusterCache: true,
	}
}

// Options tune the control-plane provider.
type Options struct {
	WatchFilterValue string

	// ClusterCache reaches the installed clusters' APIs: Cluster API's,
	// shared by the hub.
	ClusterCache clustercache.ClusterCache

	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
}

// The hub's ClusterCache, which this component uses (UsesClusterCache),
// watches Clusters and caches the Secrets labelled with a cluster name,
// dropping the data of all but the kubeconfigs.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Setup registers the provider's controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	return (&openshiftcontrolplane.Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("openshiftcontrolplane-controller"),
		ClusterCache:     opts.ClusterCache,
		WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10})
}
