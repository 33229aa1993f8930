package openshiftcontrolplane

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/metalshift/metalshift/bootstrap/reconcilers/openshiftconfig"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal/reconcilers/metalcluster"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// The control plane runs with Cluster API core, the MetalCluster and
// OpenShiftConfig reconcilers; the test plays the MetalMachine provider, and
// the installed cluster where a test registered a fakeWorkload. The
// manager serves its metrics endpoint.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true, Metrics: true,
		Components: []component.Component{{Name: "openshift", Setup: func(ctx context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			if err := (&metalcluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
				return err
			}
			if err := (&openshiftconfig.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
				return err
			}
			return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("openshiftcontrolplane"),
				BootstrapAPIGrace: time.Second, ClusterCache: hub.ClusterCache, Workload: testWorkload(hub.ClusterCache, mgr.GetAPIReader())}).
				SetupWithManager(ctx, mgr, controller.Options{})
		}}},
	}))
}

// fakeWorkload is an installed cluster steered by the test: whether its API
// answers /readyz, and whether the bootstrap node has reported the
// bootstrap complete.
type fakeWorkload struct {
	ready, complete atomic.Bool
	// nodes are the providerIDs of the cluster's Nodes.
	nodes sync.Map
}

var _ Workload = &fakeWorkload{}

func (f *fakeWorkload) Ready(context.Context) error {
	if !f.ready.Load() {
		return errors.New("/readyz: not ready yet (failing: etcd)")
	}
	return nil
}

func (f *fakeWorkload) BootstrapComplete(context.Context) (bool, error) {
	return f.complete.Load(), nil
}

// NodeProviderIDs are the providerIDs the test registered as Nodes.
func (f *fakeWorkload) NodeProviderIDs(context.Context) (map[string]bool, error) {
	ids := map[string]bool{}
	f.nodes.Range(func(k, _ any) bool {
		ids[k.(string)] = true
		return true
	})
	return ids, nil
}

// fakeWorkloads holds the fakes by Cluster name.
var fakeWorkloads sync.Map

// testWorkload is the reconciler's Workload: the fake registered for the
// Cluster, else the hub's connection through the ClusterCache (which finds
// nothing listening).
func testWorkload(cc clustercache.ClusterCache, secrets client.Reader) func(client.ObjectKey) Workload {
	return func(cluster client.ObjectKey) Workload {
		if w, ok := fakeWorkloads.Load(cluster.Name); ok {
			return w.(*fakeWorkload)
		}
		return &clusterCacheWorkload{cc: cc, secrets: secrets, cluster: cluster}
	}
}
