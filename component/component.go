package component

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	bootstrapv1 "github.com/metalshift/metalshift/api/bootstrap/v1alpha1"
	configv1 "github.com/metalshift/metalshift/api/config/v1"
	controlplanev1 "github.com/metalshift/metalshift/api/controlplane/v1alpha1"
	infrav1 "github.com/metalshift/metalshift/api/infrastructure/v1alpha1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/baremetal/webhooks"
	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/capicore"
)

// Options configure the hub manager and every component in it.
type Options struct {
	// Namespace restricts every controller to one namespace; empty means all.
	Namespace string

	// WatchFilterValue restricts the controllers to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>, to shard a fleet across managers.
	WatchFilterValue string

	// Webhook serves the admission and conversion webhooks on
	// Host:Port with tls.crt / tls.key from CertDir. Port 0 disables them.
	WebhookHost     string
	WebhookPort     int
	WebhookCertDir  string
	WebhookCertName string
	WebhookKeyName  string

	// MetricsAddr and HealthAddr are the listen addresses of the metrics and
	// health endpoints; "0" or empty disables them.
	MetricsAddr string
	HealthAddr  string

	// LeaderElection makes only one replica with the same
	// LeaderElectionNamespace / WatchFilterValue active at a time.
	LeaderElection          bool
	LeaderElectionNamespace string

	// SyncPeriod is the resync period of the informers; 0 means 10 minutes.
	SyncPeriod time.Duration

	// WorkloadConnectionRetryInterval is how soon Cluster API retries to
	// connect to a workload cluster whose API did not answer; 0 means 30s.
	WorkloadConnectionRetryInterval time.Duration

	// HostEngine configures the BareMetalHost engine.
	HostEngine HostEngineOptions

	// IgnitionServer serves Ignition configs too large for user data.
	IgnitionServer IgnitionServerOptions
}

// IgnitionServerOptions configure the bootstrap provider's ignition server,
// which serves Ignition configs too large for user data.
type IgnitionServerOptions = ignitionserver.Config

// HostEngineOptions configure the host engine's deploy server.
type HostEngineOptions struct {
	// DeployListenAddr is where the deploy server listens; empty disables
	// the host engine.
	DeployListenAddr string
	// DeployURL is how hosts reach it; defaults to http://<DeployListenAddr>.
	DeployURL string
	// SigningKey signs deploy URLs and agent tokens; keep it across restarts.
	SigningKey []byte
}

// Component is one part of the hub that registers its controllers (and
// webhooks) with the manager.
type Component struct {
	Name  string
	Setup func(ctx context.Context, mgr ctrl.Manager, opts Options) error
}

var (
	// CAPICore is the upstream Cluster API core: its controllers, and its
	// webhooks when the manager serves webhooks.
	CAPICore = Component{Name: "cluster-api-core", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		return capicore.Setup(ctx, mgr, capicore.Options{
			WatchFilterValue: opts.WatchFilterValue, Reconcilers: true, Webhooks: opts.WebhookPort != 0,
			ConnectionRetryInterval: opts.WorkloadConnectionRetryInterval,
		})
	}}

	// CAPIWebhooks is only the webhooks of the Cluster API core, for
	// environments that test a provider's reconcilers on their own.
	CAPIWebhooks = Component{Name: "cluster-api-core-webhooks", Setup: func(ctx context.Context, mgr ctrl.Manager, opts Options) error {
		return capicore.Setup(ctx, mgr, capicore.Options{WatchFilterValue: opts.WatchFilterValue, Webhooks: true})
	}}
	// HostWebhooks is only metalshift's BareMetalHost admission webhook
	// (the host engine registers it too), for environments that test
	// reconcilers without the host engine.
	HostWebhooks = Component{Name: "host-webhooks", Setup: func(_ context.Context, mgr ctrl.Manager, _ Options) error {
		return (&webhooks.BareMetalHost{}).SetupWebhookWithManager(mgr)
	}}
)

// NewScheme returns a scheme holding every type the hub serves or reads.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		capicore.AddToScheme,
		infrav1.AddToScheme,
		metal3v1.AddToScheme,
		bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme,
		configv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
