// Command metalshift installs and manages OpenShift clusters on bare metal
// from a hub Kubernetes API. `metalshift hub` runs a hub on this machine.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/metalshift/metalshift/sim"
)

// exitError carries a process exit code without printing more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// QEMU VMs of `sim equinix --backend qemu` reach the metadata service
	// through this program, started by QEMU per connection.
	if len(os.Args) > 1 && os.Args[1] == sim.MetadataForwardArg {
		os.Exit(sim.RunMetadataForward(os.Args[2:]))
	}
	if err := newRootCommand().ExecuteContext(context.Background()); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "metalshift",
		Short:         "Install and manage OpenShift clusters on bare metal from a hub Kubernetes API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newHubCommand(), newSimCommand(), newVersionCommand(),
		newCreateCommand(), newWaitForCommand(), newDestroyCommand(), newGatherCommand())
	return root
}
