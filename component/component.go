package component

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/metalshift/metalshift/config"
)

// Component is one part of the hub, declared in one value: the types it
// serves or reads, the CRDs it serves, its command-line flags, and how it
// registers its controllers, webhooks and servers with the hub's manager.
// Only Name and Setup are required.
type Component struct {
	// Name identifies the component in errors.
	Name string

	// AddToScheme adds the types the component serves or reads to a
	// scheme; the hub's scheme is the union of its components'.
	AddToScheme func(*runtime.Scheme) error

	// CRDs are the CRDs the component serves: globs into the manifests
	// package config embeds, e.g. "crd/bases/metal3.io_*.yaml". The
	// embedded hub installs those of its components.
	CRDs []string

	// Flags binds the component's options to fs. A Component holds its
	// options in the closures of its Flags, Complete and Setup, so each
	// manager needs Component values of its own (the packages' Component
	// functions return new ones).
	Flags func(fs *pflag.FlagSet)

	// Complete reads the files the component's flags name and checks its
	// options against the hub's (hub.SigningKey is read), once the flags
	// are parsed and before anything starts. Its errors are usage errors.
	Complete func(hub *Options) error

	// Setup registers the component with hub.Manager.
	Setup func(ctx context.Context, hub *Hub) error

	// Sharded are the kinds of the fleet the component reconciles, each
	// object labelled with its shard (or given its owner's label). A
	// manager with a watch-filter value caches only its shard's objects of
	// these kinds, so that what a manager holds and is sent shrinks with
	// its share of the fleet; the other kinds it reads it caches whole.
	Sharded []client.Object

	// UsesClusterCache tells that Setup uses Hub.ClusterCache. A manager
	// creates the ClusterCache (which watches Cluster API's Clusters) only
	// when one of its components uses it, so a manager of components that
	// do not can run on a cluster without Cluster API's CRDs.
	UsesClusterCache bool
}

// Hub is what a hub manager shares with every component's Setup.
type Hub struct {
	// Manager runs the components' controllers, webhooks and servers. Its
	// cache holds only Namespace (all namespaces when empty); its client
	// reads Secrets and ConfigMaps from the API, never from the cache.
	Manager ctrl.Manager

	// ClusterCache is Cluster API's cache of connections to workload
	// clusters (clients, caches, watches, reachability), one per manager,
	// used by the Cluster API core controllers and webhooks; a component
	// reaches a workload cluster through it too. Nil unless a component of
	// the manager declares UsesClusterCache.
	ClusterCache clustercache.ClusterCache

	// Clock tells the time; the real clock unless Options.Clock is set.
	Clock clock.Clock

	// Namespace is the only namespace the manager watches; empty means all.
	// A component that builds a cache or a watch of its own restricts it
	// to Namespace.
	Namespace string

	// WatchFilterValue, when set, restricts every controller to objects
	// labelled cluster.x-k8s.io/watch-filter=<value>, to shard a fleet
	// across managers.
	WatchFilterValue string

	// Webhooks tells whether the manager serves webhooks: a component
	// registers its admission and conversion webhooks only then.
	Webhooks bool

	// SigningKey signs what the hub's servers hand out to machines (deploy
	// URLs, agent and ignition tokens); at least 32 bytes, kept across
	// restarts. Empty when the hub was given none.
	SigningKey []byte

	// LiveImageDir holds the live images real machines boot
	// (metalshift-live.iso, .vmlinuz, .initrd), which the servers that
	// hand out boot images serve (the host engine's deploy server, the
	// agent service); empty means the light images, which only simulated
	// machines boot.
	LiveImageDir string
}

// Options configure a hub manager: what every component shares. A
// component's own options are bound by its Flags.
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

	// RestartableInProcess lets a process start the same controllers more
	// than once (a test that stops its hub and starts another); without
	// it controller names must be unique in the process.
	RestartableInProcess bool

	// WorkloadConnectionRetryInterval is how soon the ClusterCache retries
	// to connect to a workload cluster whose API did not answer; 0 keeps
	// Cluster API's 30s. A local hub, where a cluster's API comes up while
	// it watches, uses less.
	WorkloadConnectionRetryInterval time.Duration

	// SigningKeyFile holds the SigningKey; Complete reads it.
	SigningKeyFile string
	// SigningKey is offered to the components as Hub.SigningKey.
	SigningKey []byte

	// LiveImageDir is offered to the components as Hub.LiveImageDir.
	LiveImageDir string

	// Components names the components a manager runs (Component.Name);
	// empty means all. Select picks them.
	Components []string

	// Clock is offered to the components as Hub.Clock; nil means the real
	// clock.
	Clock clock.Clock
}

// minSigningKeyBytes is the shortest signing key the hub accepts.
const minSigningKeyBytes = 32

// BindFlags binds opts to the hub-wide flags of fs and every component's
// options to its own flags.
func BindFlags(fs *pflag.FlagSet, opts *Options, components []Component) {
	fs.StringVar(&opts.Namespace, "namespace", "", "Only watch this namespace (default: all)")
	fs.StringVar(&opts.WatchFilterValue, "watch-filter", "", "Only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value> (sharding)")
	fs.StringVar(&opts.WebhookHost, "webhook-host", "", "Address the webhook server listens on (default: all)")
	fs.IntVar(&opts.WebhookPort, "webhook-port", 9443, "Port of the webhook server; 0 disables webhooks")
	fs.StringVar(&opts.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with the webhook server's certificate and key")
	fs.StringVar(&opts.WebhookCertName, "webhook-cert-name", "tls.crt", "File name of the webhook server's certificate in --webhook-cert-dir")
	fs.StringVar(&opts.WebhookKeyName, "webhook-key-name", "tls.key", "File name of the webhook server's key in --webhook-cert-dir")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it")
	fs.StringVar(&opts.HealthAddr, "health-addr", ":9440", "Address of the health endpoints")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader, so that only one replica per --watch-filter is active")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease")
	fs.DurationVar(&opts.WorkloadConnectionRetryInterval, "workload-connection-retry-interval", 0,
		"How soon the hub connects again to a workload cluster whose API did not answer (default: Cluster API's 30s)")
	fs.StringSliceVar(&opts.Components, "components", nil, "Run only these components, a comma-separated list of "+nameList(components)+" (default: all)")
	fs.StringVar(&opts.SigningKeyFile, "signing-key-file", "", "File with at least 32 random bytes that sign deploy URLs, agent and ignition tokens; needed by both servers, keep it across restarts")
	fs.StringVar(&opts.LiveImageDir, "live-image-dir", "", "Directory of the live images `make images` builds (metalshift-live.iso, .vmlinuz, .initrd), which real machines boot "+
		"from the deploy server and the agent service; empty serves the light images, which only simulated machines boot")
	for _, c := range components {
		if c.Flags != nil {
			c.Flags(fs)
		}
	}
}

// Select returns the components of all that names lists, in the order of
// all; every one of all when names is empty. An unknown name is an error
// that lists the known ones.
func Select(all []Component, names []string) ([]Component, error) {
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[strings.TrimSpace(n)] = true
	}
	var picked []Component
	for _, c := range all {
		if want[c.Name] {
			picked = append(picked, c)
			delete(want, c.Name)
		}
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("--components: unknown %s; the components are %s", strings.Join(slices.Sorted(maps.Keys(want)), ", "), nameList(all))
	}
	return picked, nil
}

func nameList(components []Component) string {
	n := make([]string, len(components))
	for i, c := range components {
		n[i] = c.Name
	}
	return strings.Join(n, ", ")
}

// Complete reads the signing key file, then completes and checks every
// component's options (Component.Complete). Call it once the flags are
// parsed, before NewManager; its errors are usage errors.
func Complete(opts *Options, components []Component) error {
	if opts.SigningKeyFile != "" {
		key, err := os.ReadFile(opts.SigningKeyFile)
		if err != nil {
			return err
		}
		if len(key) < minSigningKeyBytes {
			return fmt.Errorf("%s: a signing key needs at least %d bytes, it has %d", opts.SigningKeyFile, minSigningKeyBytes, len(key))
		}
		opts.SigningKey = key
	}
	var errs []error
	for _, c := range components {
		if c.Complete != nil {
			errs = append(errs, c.Complete(opts))
		}
	}
	return errors.Join(errs...)
}

// NewScheme returns a scheme with the types of client-go, the CRD API,
// Cluster API's Cluster (the ClusterCache watches Clusters) and those of
// every component.
func NewScheme(components ...Component) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	for _, c := range components {
		if c.AddToScheme == nil {
			continue
		}
		if err := c.AddToScheme(s); err != nil {
			return nil, fmt.Errorf("component %s: %w", c.Name, err)
		}
	}
	return s, nil
}

// CRDs returns the CRDs the components serve, each once, sorted by name.
func CRDs(components []Component) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var globs []string
	for _, c := range components {
		globs = append(globs, c.CRDs...)
	}
	if len(globs) == 0 {
		return nil, nil
	}
	return config.CRDs(globs...)
}
