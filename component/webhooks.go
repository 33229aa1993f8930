package component

import (
	"context"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/baremetal/webhooks"
)

// HostWebhooks is only metalshift's BareMetalHost admission webhook (the
// host engine registers it too), for environments that test reconcilers
// without the host engine.
var HostWebhooks = Component{
	Name: "host-webhooks", AddToScheme: metal3v1.AddToScheme,
	Setup: func(_ context.Context, hub *Hub) error {
		return (&webhooks.BareMetalHost{}).SetupWebhookWithManager(hub.Manager)
	},
}
