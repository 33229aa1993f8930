package clusterbaremetal

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	configv1 "github.com/metalshift/metalshift/api/config/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/clusterbaremetal/pkg/metal3"
	"github.com/metalshift/metalshift/clusterbaremetal/reconcilers/provisioning"
	"github.com/metalshift/metalshift/clusterbaremetal/webhooks"
	"github.com/metalshift/metalshift/component"
)

// Defaults of the operator's flags.
const (
	// DefaultVersion is the version reported without
	// --baremetal-operator-version (upstream's manifest placeholder).
	DefaultVersion = "0.0.1-snapshot"
	// DefaultOperandImage is the manager's image the metal3 Deployment
	// runs without --baremetal-operator-operand-image.
	DefaultOperandImage = "metalshift/manager:latest"
)

// Options configure the bare-metal operator.
type Options struct {
	// Enabled runs the operator's controller.
	Enabled bool
	// Version is the operator's version, reported in the ClusterOperator's
	// versions and stamped on the operand: a new one rolls it.
	Version string
	// OperandImage is the image of metalshift's manager the metal3
	// Deployment runs.
	OperandImage string
}

// Component is the bare-metal operator as a part of the manager. Its
// webhook validates Provisionings whenever the manager serves webhooks; its
// controller runs with --baremetal-operator only, on a cluster that has the
// config.openshift.io API (an OpenShift cluster). The Provisioning CRD is
// metal3.io's: the host engine's component serves that group's CRDs.
func Component() component.Component {
	o := Options{Version: DefaultVersion, OperandImage: DefaultOperandImage}
	return component.Component{
		Name:        "baremetal-operator",
		AddToScheme: addToScheme,
		Flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&o.Enabled, "baremetal-operator", false, "Run the bare-metal operator: the Provisioning singleton, the metal3 Deployment "+
				"in openshift-machine-api and the baremetal ClusterOperator (on an OpenShift cluster)")
			fs.StringVar(&o.Version, "baremetal-operator-version", DefaultVersion, "The bare-metal operator's version (upstream's $RELEASE_VERSION); a new one rolls the metal3 Deployment")
			fs.StringVar(&o.OperandImage, "baremetal-operator-operand-image", DefaultOperandImage, "Image of metalshift's manager that the metal3 Deployment runs")
		},
		Complete: func(hub *component.Options) error {
			if !o.Enabled {
				return nil
			}
			if hub.Namespace != "" && hub.Namespace != metal3.Namespace {
				return errors.New("--baremetal-operator needs --namespace empty or " + metal3.Namespace)
			}
			if hub.WatchFilterValue != "" {
				return errors.New("--baremetal-operator runs once per cluster: it cannot be sharded with --watch-filter")
			}
			return nil
		},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return Setup(ctx, hub, o)
		},
	}
}

// Setup registers the webhook (when the manager serves webhooks) and, with
// opts.Enabled, the controller.
func Setup(ctx context.Context, hub *component.Hub, opts Options) error {
	if hub.Webhooks {
		if err := (&webhooks.Provisioning{Reader: hub.Manager.GetAPIReader()}).SetupWebhookWithManager(hub.Manager); err != nil {
			return err
		}
	}
	if !opts.Enabled {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Bare-metal operator enabled", "version", opts.Version, "operandImage", opts.OperandImage)
	return (&provisioning.Reconciler{
		Client:   hub.Manager.GetClient(),
		Recorder: hub.Manager.GetEventRecorder("baremetal-operator"),
		Clock:    hub.Clock,
		Operand:  metal3.Options{Image: opts.OperandImage, Version: opts.Version},
	}).SetupWithManager(hub.Manager)
}

func addToScheme(s *runtime.Scheme) error {
	if err := metal3v1.AddToScheme(s); err != nil {
		return err
	}
	return configv1.AddToScheme(s)
}
