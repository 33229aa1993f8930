package testenv

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	assistedwebhooks "github.com/metalshift/metalshift/assisted/webhooks"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/hostengine/webhooks"
	equinixwebhooks "github.com/metalshift/metalshift/infrastructure/equinix/webhooks"
)

// hostWebhooks is only metalshift's BareMetalHost admission webhook (the
// host engine registers it too), for environments that test reconcilers
// without the host engine.
var hostWebhooks = component.Component{
	Name: "host-webhooks", AddToScheme: metal3v1.AddToScheme,
	Setup: func(_ context.Context, hub *component.Hub) error {
		return (&webhooks.BareMetalHost{}).SetupWebhookWithManager(hub.Manager)
	},
}

// agentInstallWebhooks is only the agent-based install's admission
// webhooks (the agent-install component registers them too), for
// environments that test reconcilers without that component.
var agentInstallWebhooks = component.Component{
	Name: "agent-install-webhooks",
	AddToScheme: func(s *runtime.Scheme) error {
		for _, add := range []func(*runtime.Scheme) error{agentinstallv1.AddToScheme, hiveextv1.AddToScheme, hivev1.AddToScheme} {
			if err := add(s); err != nil {
				return err
			}
		}
		return nil
	},
	Setup: func(_ context.Context, hub *component.Hub) error {
		return assistedwebhooks.SetupWithManager(hub.Manager)
	},
}

// equinixWebhooks is only the Equinix Metal provider's admission webhooks
// (the infrastructure-equinix component registers them too), so that its
// objects are validated in every environment as on the embedded hub.
var equinixWebhooks = component.Component{
	Name: "equinix-webhooks", AddToScheme: infrav1.AddToScheme,
	Setup: func(_ context.Context, hub *component.Hub) error {
		return equinixwebhooks.SetupWithManager(hub.Manager)
	},
}
