package component

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1" //nolint:staticcheck // still served: the conversion webhooks need it
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // still served: the conversion webhooks need it
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1" //nolint:staticcheck // still served: the conversion webhooks need it
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"   //nolint:staticcheck // still served: the conversion webhooks need it
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1" //nolint:staticcheck // still served: the conversion webhooks need it
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/core/webhooks/conversion"
	"sigs.k8s.io/cluster-api/util/index"

	"github.com/metalshift/metalshift/config"
)

// The upstream Cluster API core runs in-process, unmodified: its
// controllers (Cluster, Machine, MachineSet, MachineDeployment,
// MachineHealthCheck) and its admission and conversion webhooks, wired as
// its own manager wires them, with the hub's ClusterCache. Nothing here
// patches or reimplements upstream behaviour.
var (
	// CAPICore is the Cluster API core: its controllers, and its webhooks
	// when the manager serves webhooks.
	CAPICore = Component{
		Name: "cluster-api-core", AddToScheme: addCAPIToScheme, CRDs: []string{config.CAPICRDs},
		Setup:            func(ctx context.Context, hub *Hub) error { return setupCAPICore(ctx, hub, true, hub.Webhooks) },
		UsesClusterCache: true,
	}

	// CAPIWebhooks is only the webhooks of the Cluster API core, for
	// environments that test a provider's reconcilers on their own.
	CAPIWebhooks = Component{
		Name: "cluster-api-core-webhooks", AddToScheme: addCAPIToScheme, CRDs: []string{config.CAPICRDs},
		Setup:            func(ctx context.Context, hub *Hub) error { return setupCAPICore(ctx, hub, false, true) },
		UsesClusterCache: true,
	}
)

// Grace periods of the connection to a workload cluster, as the upstream
// core manager's defaults: after remoteConnectionGracePeriod without a
// successful probe the Cluster's RemoteConnectionProbe condition goes False;
// after remoteConditionsGracePeriod remote conditions (NodeHealthy ...) go
// Unknown.
const (
	remoteConnectionGracePeriod = 50 * time.Second
	remoteConditionsGracePeriod = 5 * time.Minute
)

// CAPIControllerName is the name the core controllers and the ClusterCache
// identify with towards the API servers (user agent, field manager of the
// informers).
const CAPIControllerName = "metalshift-capi-core"

// capiConcurrency is the number of workers of each core controller and of
// the ClusterCache.
const capiConcurrency = 10

// addCAPIToScheme adds every Cluster API core type, in all served versions
// (the conversion webhooks need the old ones), to s.
func addCAPIToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clusterv1beta1.AddToScheme, clusterv1.AddToScheme,
		addonsv1beta1.AddToScheme, addonsv1.AddToScheme,
		runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
		ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// setupCAPICore registers the core indexes and, as asked, the reconcilers
// and webhooks with the hub's manager.
func setupCAPICore(ctx context.Context, hub *Hub, reconcilers, webhooks bool) error {
	if err := index.AddDefaultIndexes(ctx, hub.Manager); err != nil {
		return fmt.Errorf("adding Cluster API indexes: %w", err)
	}
	if reconcilers {
		if err := setupCAPIReconcilers(ctx, hub); err != nil {
			return err
		}
	}
	if webhooks {
		return setupCAPIWebhooks(hub.Manager, hub.ClusterCache)
	}
	return nil
}

func setupCAPIReconcilers(ctx context.Context, hub *Hub) error {
	mgr, cc, filter := hub.Manager, hub.ClusterCache, hub.WatchFilterValue
	c, r := mgr.GetClient(), mgr.GetAPIReader()
	concurrency := controller.Options{MaxConcurrentReconciles: capiConcurrency}
	reconcilers := []struct {
		name  string
		setup func() error
	}{
		{"Cluster", func() error {
			return (&cluster.Reconciler{
				Client: c, APIReader: r, ClusterCache: cc, WatchFilterValue: filter,
				RemoteConnectionGracePeriod: remoteConnectionGracePeriod,
			}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
		{"Machine", func() error {
			return (&machine.Reconciler{
				Client: c, APIReader: r, ClusterCache: cc, WatchFilterValue: filter,
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
			}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
		{"MachineSet", func() error {
			return (&machineset.Reconciler{
				Client: c, APIReader: r, ClusterCache: cc, WatchFilterValue: filter,
				PreflightChecks: sets.Set[clusterv1.MachineSetPreflightCheck]{},
			}).SetupWithManager(ctx, mgr, concurrency)
		}},
		{"MachineDeployment", func() error {
			return (&machinedeployment.Reconciler{Client: c, APIReader: r, WatchFilterValue: filter}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
		{"MachineHealthCheck", func() error {
			return (&machinehealthcheck.Reconciler{Client: c, ClusterCache: cc, WatchFilterValue: filter}).
				SetupWithManager(ctx, mgr, concurrency)
		}},
	}
	for _, rec := range reconcilers {
		if err := rec.setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", rec.name, err)
		}
	}
	return nil
}

func setupCAPIWebhooks(mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	conversion.SetAPIVersionGetter(func(ctx context.Context, gk schema.GroupKind) (string, error) {
		return apiVersionFor(ctx, mgr.GetClient(), gk)
	})
	webhooks := []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&admission.Cluster{Client: mgr.GetClient(), ClusterCacheReader: cc},
		&admission.ClusterClass{Client: mgr.GetClient()},
		&admission.Machine{},
		&admission.MachineSet{},
		&admission.MachineDeployment{},
		&admission.MachineDrainRule{},
		&admission.MachineHealthCheck{},
		&admission.MachinePool{},
		&admission.ClusterResourceSet{},
		&admission.ClusterResourceSetBinding{},
		&admission.ExtensionConfig{},
		&admission.IPAddress{Client: mgr.GetAPIReader()},
		&admission.IPAddressClaim{},
	}
	for _, w := range webhooks {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %T webhook: %w", w, err)
		}
	}
	return nil
}
