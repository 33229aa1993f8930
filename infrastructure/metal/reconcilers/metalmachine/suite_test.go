package metalmachine

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal/reconcilers/metalcluster"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{{Name: "metal", Setup: func(ctx context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			if err := (&metalcluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
				return err
			}
			return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 5})
		}}},
	}))
}
