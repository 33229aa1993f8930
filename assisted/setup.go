package assisted

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hivev1 "github.com/metalshift/metalshift/api/hive/v1"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/assisted/pkg/hoststate"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/assisted/reconcilers/agent"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclassification"
	"github.com/metalshift/metalshift/assisted/reconcilers/agentclusterinstall"
	"github.com/metalshift/metalshift/assisted/reconcilers/bmac"
	"github.com/metalshift/metalshift/assisted/reconcilers/clusterdeployment"
	"github.com/metalshift/metalshift/assisted/reconcilers/infraenv"
	"github.com/metalshift/metalshift/assisted/reconcilers/preprovisioningimage"
	"github.com/metalshift/metalshift/assisted/server"
	"github.com/metalshift/metalshift/assisted/webhooks"
	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/serving"
)

// Options configure the agent service.
type Options struct {
	// ListenAddr is where the service's HTTP server (agent REST API and
	// discovery images) listens; empty disables the service.
	ListenAddr string
	// URL is how hosts reach the server; default http(s)://<ListenAddr>.
	URL string
	// Listener, when set, is the server's listener (plain TCP: TLS serves
	// https on it); ListenAddr is then not used.
	Listener net.Listener
	// TLS serves the agent service over https; discovery images carry its
	// CA, for the agent to verify the service. Without a certificate the
	// service speaks plain http (which the manager's flags allow only with
	// --agent-service-insecure-http).
	TLS serving.TLSFiles
	// PollInterval is how often agents ask for instructions; 0 means 60s.
	PollInterval time.Duration
	// LiveImageDir holds the live images; empty serves the light images.
	LiveImageDir string
	// Key signs agent tokens and image URLs; empty means the hub's
	// signing key.
	Key []byte
	// DisconnectedAfter is how long an agent may stay silent before its
	// host is disconnected; 0 means upstream's 3 minutes. The service
	// records last contacts three times as often.
	DisconnectedAfter time.Duration
	// ConvergedFlow installs BareMetalHosts labelled for an InfraEnv the
	// converged way (upstream's ALLOW_CONVERGED_FLOW, on by default there
	// and with --allow-converged-flow): the service serves their
	// PreprovisioningImages and BMAC sets the custom deploy
	// start_assisted_install. It needs DeployURL; without it the service
	// runs the other flow.
	ConvergedFlow bool
	// DeployURL is the host engine's deploy server as hosts reach it,
	// which converged-flow images carry.
	DeployURL string
	// DeployCAFile holds the CA hosts trust for DeployURL (https), which
	// converged-flow images carry; read again when it changes.
	DeployCAFile string
	// Budgets limit what one client may cost the service's server; zero
	// fields are serving's defaults.
	Budgets serving.Budgets
	// HostTimeouts limit each host's install and its stages; zero fields
	// are upstream's defaults.
	HostTimeouts hoststate.Timeouts
}

// Component is the agent-based install as a part of the hub: the
// agent-install, extensions.hive and hive APIs with their admission
// webhooks (when the manager serves webhooks), the agent service's server
// at --agent-service-listen-address and its controllers. Without that
// flag the hub only serves the CRDs and their webhooks.
func Component() component.Component {
	var (
		o             Options
		insecure      bool
		stageTimeouts map[string]string
	)
	return component.Component{
		Name:        "agent-install",
		AddToScheme: AddToScheme,
		// An Agent takes its InfraEnv's shard label when it registers.
		Sharded: []client.Object{&agentinstallv1.InfraEnv{}, &agentinstallv1.Agent{}, &hiveextv1.AgentClusterInstall{}, &hivev1.ClusterDeployment{}},
		CRDs: []string{
			"crd/bases/agent-install.openshift.io_*.yaml",
			"crd/bases/extensions.hive.openshift.io_*.yaml",
			"crd/bases/hive.openshift.io_*.yaml",
		},
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.ListenAddr, "agent-service-listen-address", "", "Where the agent service (the agent-based install's REST API and discovery images) listens; empty disables it")
			fs.StringVar(&o.URL, "agent-service-url", "", "How hosts reach the agent service (default https://<agent-service-listen-address>, http:// with --agent-service-insecure-http)")
			fs.StringVar(&o.TLS.CertFile, "agent-service-cert-file", "", "Serving certificate of the agent service (https); read again when it changes")
			fs.StringVar(&o.TLS.KeyFile, "agent-service-key-file", "", "Key of --agent-service-cert-file; read again when it changes")
			fs.StringVar(&o.TLS.CAFile, "agent-service-ca-file", "", "CA bundle hosts trust for the agent service, put in discovery images; read again when it changes")
			fs.BoolVar(&insecure, "agent-service-insecure-http", false, "Serve the agent service over plain http, without --agent-service-cert-file: for a lab only (agent credentials and the bootstrap Ignition cross the network in the clear)")
			fs.DurationVar(&o.PollInterval, "agent-poll-interval", 0, "How often discovery agents ask for instructions (default 60s, as upstream)")
			fs.BoolVar(&o.ConvergedFlow, "allow-converged-flow", convergedFlowDefault(), "Install BareMetalHosts labelled for an InfraEnv with the converged flow "+
				"(PreprovisioningImages, custom deploy start_assisted_install); needs --agent-service-deploy-url (default true, or $ALLOW_CONVERGED_FLOW)")
			fs.StringVar(&o.DeployURL, "agent-service-deploy-url", "", "The host engine's deploy server URL as hosts reach it, which converged-flow discovery images carry")
			fs.StringVar(&o.DeployCAFile, "agent-service-deploy-ca-file", "", "CA bundle hosts trust for --agent-service-deploy-url (https), which converged-flow discovery images carry; read again when it changes")
			fs.DurationVar(&o.HostTimeouts.Start, "agent-installation-timeout", 0, "How long a host may stay installing before it reports its first stage, then it fails (default 20m, as upstream)")
			fs.StringToStringVar(&stageTimeouts, "agent-host-stage-timeouts", nil, "Limits of host install stages, as stage=duration pairs, e.g. \"Writing image to disk=45m,REBOOTING=1h\"; "+
				"a host whose stage has no report for longer fails (default upstream's: 30m for Starting installation and Writing image to disk, 40m for Rebooting (80m for a single node), 24h for Waiting for ignition, 60m for the others)")
		},
		Complete: func(hub *component.Options) error {
			if o.ListenAddr == "" {
				return nil
			}
			if len(hub.SigningKey) == 0 {
				return errors.New("--signing-key-file is required with --agent-service-listen-address")
			}
			var err error
			if o.HostTimeouts.Stages, err = hoststate.ParseStageTimeouts(stageTimeouts); err != nil {
				return fmt.Errorf("--agent-host-stage-timeouts: %w", err)
			}
			if o.HostTimeouts.Start < 0 {
				return errors.New("--agent-installation-timeout must not be negative")
			}
			if strings.HasPrefix(o.DeployURL, "https:") && o.DeployCAFile == "" {
				return errors.New("--agent-service-deploy-ca-file is required with an https --agent-service-deploy-url: converged-flow images carry it")
			}
			return o.TLS.Check("agent-service", insecure, true)
		},
		Setup: func(ctx context.Context, hub *component.Hub) error {
			if hub.Webhooks { // admission is part of the API: served with or without the service
				if err := webhooks.SetupWithManager(hub.Manager); err != nil {
					return err
				}
			}
			if o.ListenAddr == "" {
				ctrl.LoggerFrom(ctx).Info("Agent service disabled: no --agent-service-listen-address")
				return nil
			}
			opts := o
			opts.LiveImageDir = hub.LiveImageDir
			return Setup(ctx, hub, opts)
		},
	}
}

// Setup starts the agent service's server and registers its controllers.
func Setup(ctx context.Context, hub *component.Hub, o Options) error {
	mgr := hub.Manager
	if o.Listener != nil {
		o.ListenAddr = o.Listener.Addr().String()
	}
	if o.URL == "" {
		o.URL = o.TLS.Scheme() + "://" + o.ListenAddr
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &agentinstallv1.InfraEnv{}, server.UIDIndex, server.IndexUID); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &hiveextv1.AgentClusterInstall{}, server.UIDIndex, server.IndexUID); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &agentinstallv1.Agent{}, record.ClusterDeploymentIndex, record.IndexClusterDeployment); err != nil {
		return err
	}
	var images *imageservice.Images
	if o.LiveImageDir != "" {
		var err error
		if images, err = imageservice.LoadImages(o.LiveImageDir); err != nil {
			return fmt.Errorf("loading the live images: %w", err)
		}
	}
	if len(o.Key) == 0 {
		o.Key = hub.SigningKey
	}
	if o.ConvergedFlow && o.DeployURL == "" {
		ctrl.LoggerFrom(ctx).Info("Converged flow off: the agent service has no --agent-service-deploy-url")
		o.ConvergedFlow = false
	}
	//nolint:staticcheck // core/v1 Events, which kubectl describe shows for these objects; the events.k8s.io recorder comes with the move to it hub-wide
	recorder := mgr.GetEventRecorderFor("metalshift-agent-service")
	log := mgr.GetLogger().WithName("agent-service")
	cas, err := serviceCAs(o, log)
	if err != nil {
		return err
	}
	secrets, err := record.SecretCache(mgr, hub.Namespace)
	if err != nil {
		return err
	}
	// Every part of the service reads Secrets through sc: from the cache
	// of those it labelled. The controllers' writes of the installs'
	// objects go through c, which records them in writes, so that no
	// reconcile computes again, from a cache that has not seen it yet,
	// what one of them wrote. The REST server's writes (an agent's calls:
	// its contact, its progress) are not recorded: they come at the
	// agents' pace, and a reconcile waiting for the cache to see each of
	// them would wait for as long as agents call faster than the cache
	// follows (a saturated API server).
	sc := record.SecretClient{Client: mgr.GetClient(), Cache: secrets, API: mgr.GetAPIReader()}
	writes := reconciler.NewWrites(&agentinstallv1.Agent{}, &hiveextv1.AgentClusterInstall{}, &hivev1.ClusterDeployment{})
	c := writes.Client(sc)
	heartbeat := o.DisconnectedAfter / 3
	// The REST server reads its own writes of Agents (reconciler.OwnWrites):
	// it decides on each call whether to write (a contact once a minute, a
	// report that changed), and deciding on a cache behind its last write
	// would write again on every call of a fleet of agents.
	srv, err := server.New(server.Options{Client: reconciler.NewOwnWrites(sc, &agentinstallv1.Agent{}), APIReader: mgr.GetAPIReader(), Key: o.Key, BaseURL: o.URL, CA: cas.service.PEM, DeployCA: cas.deploy.PEM,
		Clock: hub.Clock, PollInterval: o.PollInterval, Images: images, HeartbeatEvery: heartbeat, DeployURL: o.DeployURL, Recorder: recorder, WatchFilterValue: hub.WatchFilterValue})
	if err != nil {
		return err
	}
	hs, err := serving.NewServer(srv.Handler(), serving.Options{Name: "agent-service", Budgets: o.Budgets, Unauthenticated: serviceUnauthenticated, Log: log})
	if err != nil {
		return err
	}
	ln, err := serving.Listen(o.Listener, o.ListenAddr, o.TLS, "agent service", log)
	if err != nil {
		return err
	}
	if err := mgr.Add(&manager.Server{Name: "agent-service", Server: hs, Listener: ln, ShutdownTimeout: ptr.To(5 * time.Second)}); err != nil {
		return err
	}
	opts := controller.Options{MaxConcurrentReconciles: 10}
	shard := hub.WatchFilterValue // every controller reconciles only its shard
	if err := (&infraenv.Reconciler{Client: c, Recorder: recorder, Clock: hub.Clock,
		Images: imagesAdapter{srv}, EventsURL: srv.EventsURL, WatchFilterValue: shard}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	// The service serves from the manager's start, moments from now: its
	// downtime before it does not count against the agents.
	if err := (&agent.Reconciler{Client: c, Recorder: recorder, Clock: hub.Clock,
		DisconnectedAfter: o.DisconnectedAfter, ServiceStart: hub.Clock.Now(), EventsURL: srv.EventsURL, Timeouts: o.HostTimeouts, WatchFilterValue: shard, Writes: writes}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&agentclassification.LabelReconciler{Client: c, WatchFilterValue: shard}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&agentclassification.Reconciler{Client: c, Clock: hub.Clock, WatchFilterValue: shard}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := (&clusterdeployment.Reconciler{Client: c, Recorder: recorder, WatchFilterValue: shard, Writes: writes}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	// BareMetalHosts labelled for an InfraEnv install through it (ZTP).
	if err := (&bmac.Reconciler{Client: c, Recorder: recorder, ConvergedFlow: o.ConvergedFlow, WatchFilterValue: shard}).SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if o.ConvergedFlow {
		if err := (&preprovisioningimage.Reconciler{Client: c, Recorder: recorder, Images: srv, WatchFilterValue: shard}).SetupWithManager(mgr, opts); err != nil {
			return err
		}
	}
	return (&agentclusterinstall.Reconciler{Client: c, Recorder: recorder,
		Clock: hub.Clock, EventsURL: srv.EventsURL, ContactEvery: heartbeat, WatchFilterValue: shard, Writes: writes}).SetupWithManager(mgr, opts)
}

// cas are the CAs discovery images carry: the service's, and the deploy
// server's for converged-flow images; nil ones for plain http.
type cas struct{ service, deploy *serving.CA }

// serviceCAs reads the CAs of o's files.
func serviceCAs(o Options, log logr.Logger) (cas, error) {
	var c cas
	var err error
	if o.TLS.Enabled() && o.TLS.CAFile != "" {
		if c.service, err = serving.NewCA(o.TLS.CAFile, "agent service", log); err != nil {
			return c, fmt.Errorf("the agent service's CA: %w", err)
		}
	}
	if o.DeployCAFile != "" {
		if c.deploy, err = serving.NewCA(o.DeployCAFile, "deploy server", log); err != nil {
			return c, fmt.Errorf("the deploy server's CA: %w", err)
		}
	}
	return c, nil
}

// serviceUnauthenticated are the agent service's requests without a
// host's credential, limited per source: discovery images by signed URL,
// registrations and manual boots with an InfraEnv's key, events by signed
// query, log uploads.
var serviceUnauthenticated = serving.Matching("GET /images/",
	"POST "+fmt.Sprintf(assistedapi.RegisterPath, "{ie}"), "POST "+fmt.Sprintf(assistedapi.ManualBootPath, "{ie}"),
	"GET "+assistedapi.EventsPath, "POST "+fmt.Sprintf(assistedapi.LogsPath, "{cluster}"))

// convergedFlowDefault is $ALLOW_CONVERGED_FLOW, true when unset or not a
// boolean, as upstream.
func convergedFlowDefault() bool {
	v, err := strconv.ParseBool(os.Getenv("ALLOW_CONVERGED_FLOW"))
	return err != nil || v
}

// imagesAdapter gives the InfraEnv reconciler the server's image URLs.
type imagesAdapter struct{ *server.Server }

func (a imagesAdapter) URLs(ie *agentinstallv1.InfraEnv, digest string, now time.Time) infraenv.URLs {
	u := a.ImageURLs(ie, digest, now)
	return infraenv.URLs{ISO: u.ISO, IPXEScript: u.IPXEScript, Kernel: u.Kernel, Initrd: u.Initrd, Expires: u.Expires}
}

// AddToScheme adds the types of the agent-based install's API groups:
// agent-install.openshift.io, extensions.hive.openshift.io and hive's.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		agentinstallv1.AddToScheme, hiveextv1.AddToScheme, hivev1.AddToScheme,
		metal3v1.AddToScheme, // BareMetalHosts, for the BareMetalHost ⇄ Agent controller
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}
