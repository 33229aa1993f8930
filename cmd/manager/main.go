// Command manager runs the hub's controllers (upstream Cluster API core and
// every metalshift component) against an existing Kubernetes API, as a
// Deployment on a production hub. `metalshift hub up` runs the same manager,
// with the same command line, in-process on a local control plane.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/metalshift/metalshift/component"
	"github.com/metalshift/metalshift/manager"
)

func main() {
	var (
		opts    component.Options
		zapOpts zap.Options
	)
	// The hub-wide flags, then each component's own.
	components := manager.Components()
	component.BindFlags(pflag.CommandLine, &opts, components)
	gofs := flag.NewFlagSet("zap", flag.ExitOnError)
	zapOpts.BindFlags(gofs)
	// --kubeconfig (else $KUBECONFIG, else in-cluster), as ctrl.GetConfigOrDie reads it.
	gofs.Var(flag.CommandLine.Lookup("kubeconfig").Value, "kubeconfig", flag.CommandLine.Lookup("kubeconfig").Usage)
	pflag.CommandLine.AddGoFlagSet(gofs)
	pflag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	components, err := component.Select(components, opts.Components)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	if err := component.Complete(&opts, components); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := component.NewManager(ctx, ctrl.GetConfigOrDie(), manager.Name, opts, components)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
