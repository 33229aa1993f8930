package openshiftconfig

import (
	"context"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{
			{Name: "bootstrap", Setup: func(ctx context.Context, mgr ctrl.Manager, _ component.Options) error {
				return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, controller.Options{})
			}},
			{Name: "metal", Setup: func(ctx context.Context, mgr ctrl.Manager, _ component.Options) error {
				return metal.Setup(ctx, mgr, metal.Options{})
			}},
		},
	}))
}
