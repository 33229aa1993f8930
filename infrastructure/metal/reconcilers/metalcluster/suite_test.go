package metalcluster

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{{Name: "metalcluster", Setup: func(ctx context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{})
		}}},
	}))
}
