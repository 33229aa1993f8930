package bmac_test

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts envtest with BMAC alone, in the converged flow (the
// hub's default): the tests write Agents as the agent service would, and
// no host engine acts on the hosts.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Components: []component.Component{{Name: "bmac", Setup: func(_ context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			//nolint:staticcheck // core/v1 Events, as the hub's recorder (assisted.Setup)
			recorder := mgr.GetEventRecorderFor("bmac-test")
			return (&bmac.Reconciler{Client: mgr.GetClient(), Recorder: recorder, ConvergedFlow: true}).
				SetupWithManager(mgr, controller.Options{})
		}}},
	}))
}
