package openshiftconfig

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/metal"
	"github.com/metalshift/metalshift/internal/testenv"
)

var (
	env *testenv.Env
	// ignitionServer serves the configs too large for user data; the
	// suite's reconciler uses it.
	ignitionServer *ignitionserver.Server
)

func TestMain(m *testing.M) {
	// The server's URL must be known before it can be created.
	ts := httptest.NewUnstartedServer(nil)
	defer ts.Close()
	os.Exit(testenv.Run(m, &env, testenv.Options{
		CAPICore: true,
		Components: []component.Component{
			{Name: "bootstrap", Setup: func(ctx context.Context, hub *component.Hub) error {
				mgr := hub.Manager
				s, err := ignitionserver.New(ignitionserver.Options{Client: mgr.GetClient(), Key: []byte("0123456789abcdef0123456789abcdef"),
					BaseURL: "http://" + ts.Listener.Addr().String()})
				if err != nil {
					return err
				}
				ignitionServer = s
				ts.Config.Handler = s.Handler()
				ts.Start()
				return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), IgnitionServer: s}).SetupWithManager(ctx, mgr, controller.Options{})
			}},
			metal.Component(),
		},
	}))
}
