package agentclassification_test

import (
	"context"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/metalshift/metalshift/assisted/reconcilers/agentclassification"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/internal/testenv"
)

var env *testenv.Env

// TestMain starts envtest with the label and the classification
// controllers, as the agent service registers them.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Components: []component.Component{{Name: "agentclassification", Setup: func(_ context.Context, hub *component.Hub) error {
			mgr := hub.Manager
			if err := (&agentclassification.LabelReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, controller.Options{}); err != nil {
				return err
			}
			return (&agentclassification.Reconciler{Client: mgr.GetClient(), Clock: hub.Clock}).SetupWithManager(mgr, controller.Options{})
		}}},
	}))
}
