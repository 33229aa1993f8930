// Command manager runs the hub's controllers (upstream Cluster API core and
// every metalshift component) against an existing Kubernetes API, as a
// Deployment on a production hub. `metalshift hub up` runs the same manager
// in-process on a local control plane.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/metalshift/metalshift/manager"
)

func main() {
	var (
		opts    manager.Options
		zapOpts zap.Options
	)
	fs := pflag.CommandLine
	fs.StringVar(&opts.Namespace, "namespace", "", "Only watch this namespace (default: all)")
	fs.StringVar(&opts.WatchFilterValue, "watch-filter", "", "Only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value> (sharding)")
	fs.IntVar(&opts.WebhookPort, "webhook-port", 9443, "Port of the webhook server; 0 disables webhooks")
	fs.StringVar(&opts.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with tls.crt and tls.key of the webhook server")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it")
	fs.StringVar(&opts.HealthAddr, "health-addr", ":9440", "Address of the health endpoints")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader, so that only one replica per --watch-filter is active")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease")
	gofs := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
	pflag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

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
