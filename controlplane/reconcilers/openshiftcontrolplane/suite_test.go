package openshiftcontrolplane

import (
	"context"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/bootstrap/reconcilers/openshiftconfig"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal/reconcilers/metalcluster"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// The control plane runs with Cluster API core, the MetalCluster and
// OpenShiftConfig reconcilers; the test plays the MetalMachine provider.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{{Name: "openshift", Setup: func(ctx context.Context, mgr ctrl.Manager, _ component.Options) error {
			if err := (&metalcluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
				return err
			}
			if err := (&openshiftconfig.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
				return err
			}
			return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("openshiftcontrolplane"),
				BootstrapAPIGrace: time.Second}).
				SetupWithManager(ctx, mgr, controller.Options{})
		}}},
	}))
}
