// Command manager runs the hub's controllers (upstream Cluster API core and
// every metalshift component) against an existing Kubernetes API, as a
// Deployment on a production hub. `metalshift hub up` runs the same manager
// in-process on a local control plane.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/metalshift/metalshift/bootstrap/ignitionserver"
	"github.com/metalshift/metalshift/manager"
)

func main() {
	var (
		opts           manager.Options
		zapOpts        zap.Options
		signingKeyFile string
		ignitionCAFile string
	)
	fs := pflag.CommandLine
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
	fs.StringVar(&opts.HostEngine.DeployListenAddr, "deploy-listen-address", "", "Where the host engine's deploy server listens (hosts fetch deploy images and their agents report there); empty disables the host engine")
	fs.StringVar(&opts.HostEngine.DeployURL, "deploy-url", "", "How hosts reach the deploy server (default http://<deploy-listen-address>)")
	fs.StringVar(&opts.IgnitionServer.ListenAddr, "ignition-listen-address", "", "Where the ignition server listens (serves Ignition configs too large for user data); empty disables it")
	fs.StringVar(&opts.IgnitionServer.URL, "ignition-url", "", "How hosts reach the ignition server (default http(s)://<ignition-listen-address>)")
	fs.StringVar(&opts.IgnitionServer.CertFile, "ignition-cert-file", "", "Serving certificate of the ignition server (https); reloaded when it changes")
	fs.StringVar(&opts.IgnitionServer.KeyFile, "ignition-key-file", "", "Key of --ignition-cert-file")
	fs.StringVar(&ignitionCAFile, "ignition-ca-file", "", "CA bundle hosts trust for the ignition server (https)")
	fs.IntVar(&opts.IgnitionServer.MaxUserDataBytes, "max-user-data-bytes", 0, "Largest Ignition config put in user data as is (default 64 KiB)")
	fs.DurationVar(&opts.IgnitionServer.TokenTTL, "ignition-token-ttl", ignitionserver.DefaultTokenTTL,
		"How long the token of a served Ignition config is valid; a machine that boots later is refused (its config is re-signed while it waits for a host)")
	fs.StringVar(&signingKeyFile, "signing-key-file", "", "File with at least 32 random bytes that sign deploy URLs, agent and ignition tokens; needed by both servers, keep it across restarts")
	gofs := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(gofs)
	// --kubeconfig (else $KUBECONFIG, else in-cluster), as ctrl.GetConfigOrDie reads it.
	gofs.Var(flag.CommandLine.Lookup("kubeconfig").Value, "kubeconfig", flag.CommandLine.Lookup("kubeconfig").Usage)
	fs.AddGoFlagSet(gofs)
	pflag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	if err := loadFiles(&opts, signingKeyFile, ignitionCAFile); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := manager.New(ctx, ctrl.GetConfigOrDie(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// loadFiles checks the ignition token lifetime and reads the signing key
// and the ignition CA the flags name.
func loadFiles(opts *manager.Options, signingKeyFile, ignitionCAFile string) error {
	if opts.IgnitionServer.TokenTTL <= 0 {
		return fmt.Errorf("--ignition-token-ttl must be positive, not %s", opts.IgnitionServer.TokenTTL)
	}
	if opts.HostEngine.DeployListenAddr != "" || opts.IgnitionServer.ListenAddr != "" {
		if signingKeyFile == "" {
			return errors.New("--signing-key-file is required with --deploy-listen-address or --ignition-listen-address")
		}
		key, err := os.ReadFile(signingKeyFile)
		if err != nil {
			return err
		}
		if len(key) < 32 {
			return fmt.Errorf("%s: a signing key needs at least 32 bytes, it has %d", signingKeyFile, len(key))
		}
		opts.HostEngine.SigningKey, opts.IgnitionServer.SigningKey = key, key
	}
	if ignitionCAFile != "" {
		ca, err := os.ReadFile(ignitionCAFile)
		if err != nil {
			return err
		}
		opts.IgnitionServer.CA = ca
	}
	return nil
}
