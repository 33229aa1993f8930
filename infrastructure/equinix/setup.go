// Package equinix is the Equinix Metal infrastructure provider as a part of
// the hub: the EquinixMetalCluster, EquinixMetalMachine and
// EquinixMetalMachineTemplate CRDs, their admission webhooks and their
// reconcilers (devices, elastic IPs), with the cloud-node controllers the
// hub runs against the installed clusters (package cloudnodes). Its client
// of the Equinix Metal API is package metalclient.
package equinix

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/infrastructure/equinix/cloudnode"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloud"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/cloudnodes"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/equinixmetalcluster"
	"github.com/metalshift/metalshift/infrastructure/equinix/reconcilers/equinixmetalmachine"
	"github.com/metalshift/metalshift/infrastructure/equinix/webhooks"
)

// ComponentName names the component (manager --components).
const ComponentName = "infrastructure-equinix"

// Component is the Equinix Metal infrastructure provider as a part of the
// hub: its CRDs, its webhooks when the manager serves webhooks, and its
// reconcilers.
func Component() component.Component {
	var bootURL string
	return component.Component{
		Name:        ComponentName,
		AddToScheme: infrav1.AddToScheme,
		CRDs:        []string{"crd/bases/infrastructure.cluster.x-k8s.io_equinixmetal*.yaml"},
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&bootURL, "equinix-boot-url", "", "How Equinix Metal devices reach the deploy server's plain-http boot listener (the host engine's --deploy-boot-url), "+
				"whose iPXE script boots metalshift's live image on them; empty: each EquinixMetalMachine must name its own ipxeScriptURL")
		},
		Complete: func(hub *component.Options) error {
			if bootURL != "" && len(hub.SigningKey) == 0 {
				return errors.New("--signing-key-file is required with --equinix-boot-url")
			}
			return nil
		},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			return Setup(ctx, hub.Manager, Options{Webhooks: hub.Webhooks, WatchFilterValue: hub.WatchFilterValue, Clock: hub.Clock,
				BootURL: bootURL, SigningKey: hub.SigningKey})
		},
	}
}

// Options configure the Equinix Metal provider.
type Options struct {
	// Webhooks serves the provider's admission webhooks on the manager's
	// webhook server; set it when the manager serves webhooks.
	Webhooks bool
	// WatchFilterValue restricts the controllers to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string
	// Clock tells the time (the real clock when nil).
	Clock clock.PassiveClock
	// PollInterval is how often a device or an address on its way is
	// looked at again (the reconcilers' defaults when 0).
	PollInterval time.Duration
	// Cloud is how the reconcilers reach the API.
	Cloud cloud.Options
	// BootURL is the base URL of the deploy server's plain-http boot
	// listener (the host engine's --deploy-boot-url), which serves devices
	// their iPXE script, signed with SigningKey; empty: machines must name
	// a script of their own.
	BootURL    string
	SigningKey []byte
	// BootScriptURL, when set, is the iPXE script a device boots when its
	// machine names none, instead of the one at BootURL (tests).
	BootScriptURL func(ctx context.Context, emm *infrav1.EquinixMetalMachine, emc *infrav1.EquinixMetalCluster) (string, error)
	// CloudNode are the options of the cloud-node controllers the hub
	// runs against the installed clusters (their ResyncInterval and
	// RetryInterval; package cloudnode's defaults when 0).
	CloudNode cloudnode.Options
}

// Setup registers the provider with mgr: its reconcilers, and its webhooks
// with opts.Webhooks.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Cloud.UserAgent == "" {
		opts.Cloud.UserAgent = "metalshift"
	}
	if opts.BootScriptURL == nil && opts.BootURL != "" {
		if len(opts.SigningKey) == 0 {
			return errors.New("the Equinix Metal provider needs the hub's signing key to sign devices' boot URLs")
		}
		base, key, clk := opts.BootURL, opts.SigningKey, opts.Clock
		opts.BootScriptURL = func(_ context.Context, emm *infrav1.EquinixMetalMachine, emc *infrav1.EquinixMetalCluster) (string, error) {
			return cloud.BootScript(base, key, clk.Now(), emm, emc)
		}
	}
	if err := (&equinixmetalcluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("equinixmetalcluster-controller"),
		Clock: opts.Clock, Cloud: opts.Cloud, PollInterval: opts.PollInterval, WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 5}); err != nil {
		return err
	}
	if err := (&equinixmetalmachine.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("equinixmetalmachine-controller"),
		Clock: opts.Clock, Cloud: opts.Cloud, PollInterval: opts.PollInterval, BootScriptURL: opts.BootScriptURL,
		WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 10}); err != nil {
		return err
	}
	// A passive clock cannot time the pause between a failed
	// controller's starts: the real clock does then.
	runClock, ok := opts.Clock.(clock.Clock)
	if !ok {
		runClock = clock.RealClock{}
	}
	if err := (&cloudnodes.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("equinixmetalcluster-cloudnode"),
		Clock: runClock, Cloud: opts.Cloud, Node: opts.CloudNode, WatchFilterValue: opts.WatchFilterValue,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 5}); err != nil {
		return err
	}
	if !opts.Webhooks {
		return nil
	}
	return webhooks.SetupWithManager(mgr)
}
