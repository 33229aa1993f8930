package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of metalshift and of the Cluster API it embeds",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			out := cmd.OutOrStdout()
			info, ok := debug.ReadBuildInfo()
			if !ok {
				fmt.Fprintln(out, "metalshift (unknown build)")
				return
			}
			fmt.Fprintf(out, "metalshift %s (%s)\n", info.Main.Version, info.GoVersion)
			for _, dep := range info.Deps {
				if dep.Path == "sigs.k8s.io/cluster-api" || dep.Path == "sigs.k8s.io/controller-runtime" {
					fmt.Fprintf(out, "  %s %s\n", dep.Path, dep.Version)
				}
			}
		},
	}
}
