package manager

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/metalshift/metalshift/component"
)

// Run runs a manager in this process with the command line args (without
// the program name), against the API cfg reaches, until ctx is done: what
// `manager` does with the same arguments, less its logging flags. A
// process may run several; each gets its own controllers.
func Run(ctx context.Context, cfg *rest.Config, args []string) error {
	var opts component.Options
	components := Components()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	component.BindFlags(fs, &opts, components)
	if err := fs.Parse(args); err != nil {
		return err
	}
	components, err := component.Select(components, opts.Components)
	if err != nil {
		return err
	}
	if err := component.Complete(&opts, components); err != nil {
		return err
	}
	opts.RestartableInProcess = true
	mgr, err := component.NewManager(ctx, cfg, Name, opts, components)
	if err != nil {
		return fmt.Errorf("the manager: %w", err)
	}
	return mgr.Start(ctx)
}
