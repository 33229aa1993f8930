package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/cluster"
)

type simBMCOptions struct {
	hosts        int
	listen       string
	bootURL      string
	hubDir       string
	namespace    string
	virtualMedia bool
	manifests    string
	username     string
	password     string
	binDir       string
	console      bool
	backend      string
	stateDir     string
	bootModes    []string
	legacyBMC    string
}

func newSimCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run simulated hardware behind real protocols (Redfish BMCs, machines that boot what they are told)",
	}
	o := &simBMCOptions{}
	bmc := &cobra.Command{
		Use:   "bmc",
		Short: "Serve simulated machines behind one Redfish endpoint and print a BareMetalHost and Secret per machine",
		Long: `Serve N simulated machines behind one Redfish BMC emulator until Ctrl-C.
Each machine boots what its BMC says: the deploy ISO from virtual media, iPXE from the
hub's deploy server (the provisioning network's boot server), or its disk.

The manifests (a Secret and a BareMetalHost per machine) go to stdout, or to --manifests:
  metalshift sim bmc --hosts 3 --manifests hosts.yaml &
  kubectl --kubeconfig $(metalshift hub kubeconfig) apply -f hosts.yaml
  kubectl --kubeconfig $(metalshift hub kubeconfig) get bmh -w

With --backend qemu each machine is a QEMU VM (qemu-system-x86_64, TCG) built from its
inventory, booting OVMF (UEFI) or SeaBIOS (legacy) as --boot-mode says; VMs reach the
host's loopback at 10.0.2.2. Legacy machines are addressed as --legacy-bmc says:
  metalshift sim bmc --backend qemu --hosts 2 --boot-mode UEFI,legacy --legacy-bmc ipmi`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := bmc.Flags()
	f.IntVar(&o.hosts, "hosts", 3, "Number of machines")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "Address of the Redfish endpoint")
	f.StringVar(&o.bootURL, "boot-url", "", "Boot server for network boot (default: the deploy server of the hub in --hub-dir)")
	f.StringVar(&o.hubDir, "hub-dir", localcp.DefaultDir(), "Hub whose deploy server is the boot server")
	f.StringVar(&o.namespace, "namespace", "default", "Namespace of the printed manifests")
	f.BoolVar(&o.virtualMedia, "virtual-media", true, "Address the BMCs as redfish-virtualmedia (else redfish, booting over PXE)")
	f.StringVar(&o.manifests, "manifests", "", "Write the manifests to this file instead of stdout")
	f.StringVar(&o.username, "username", "admin", "BMC username")
	f.StringVar(&o.password, "password", "", "BMC password (default: random)")
	f.BoolVar(&o.console, "console", false, "Print the machines' console lines (boots, the deploy agent's steps) to stderr, each after the machine's name")
	f.StringVar(&o.backend, "backend", sim.BackendLight, "What machines are: light (simulated firmware and disks) or qemu (a QEMU VM each)")
	f.StringVar(&o.stateDir, "state-dir", "", "Directory for the VMs' disks, UEFI variables, media and consoles, and for ipmi_sim (default: a temporary directory removed on exit)")
	f.StringSliceVar(&o.bootModes, "boot-mode", []string{"UEFI"}, "Firmware of the machines, UEFI or legacy; a list is used in turn (UEFI,legacy: every other machine legacy)")
	f.StringVar(&o.legacyBMC, "legacy-bmc", sim.LegacyBMCRedfish, "How BareMetalHosts of legacy machines reach their BMC: redfish (network boot) or ipmi (an ipmi_sim each, network boot)")
	f.StringVar(&o.binDir, "bin-dir", "", "Directory holding etcd and kube-apiserver, which installed clusters run (default: as `hub up`)")
	cmd.AddCommand(bmc, newSimImageCommand())
	return cmd
}

func (o *simBMCOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if o.hosts < 1 {
		return fmt.Errorf("--hosts must be at least 1")
	}
	bootURL := o.bootURL
	if bootURL == "" {
		if st, err := localcp.ReadState(o.hubDir); err == nil && st.Ports.Deploy != 0 {
			bootURL = "http://127.0.0.1:" + strconv.Itoa(st.Ports.Deploy)
		}
	}
	modes, err := parseBootModes(o.bootModes)
	if err != nil {
		return err
	}
	opts := sim.LabOptions{Hosts: o.hosts, Username: o.username, Password: o.password, BootURL: bootURL,
		Backend: o.backend, StateDir: o.stateDir, BootModes: modes, LegacyBMC: o.legacyBMC}
	if o.backend != sim.BackendQEMU { // VMs run their installed OS themselves
		world, err := cluster.New(cluster.Options{BinDir: o.binDir, Logf: func(format string, args ...any) {
			fmt.Fprintf(stderr, format+"\n", args...)
		}})
		if err != nil {
			return err
		}
		defer world.Close()
		opts.World = world
	}
	if o.console {
		opts.Console = stderr
	}
	lab := sim.NewLab(opts)
	if err := lab.Start(o.listen); err != nil {
		return err
	}
	defer lab.Close()
	data, err := lab.Manifests(o.namespace, o.virtualMedia)
	if err != nil {
		return err
	}
	if o.manifests != "" {
		if err := os.WriteFile(o.manifests, data, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Wrote a Secret and a BareMetalHost for each of %d machines to %s\n", o.hosts, o.manifests)
	} else if _, err := stdout.Write(data); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Serving %d simulated machines at redfish endpoint http://%s (boot server: %s); Ctrl-C stops them\n",
		o.hosts, lab.Endpoint(), orNone(bootURL))
	if lab.QEMU != nil {
		fmt.Fprintf(stderr, "QEMU VMs keep their disks, consoles (console.log) and logs in %s/<machine>\n", lab.Opts.StateDir)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(stderr, "Stopping the simulated machines")
	return nil
}

// parseBootModes reads --boot-mode.
func parseBootModes(values []string) ([]metal3v1.BootMode, error) {
	var modes []metal3v1.BootMode
	for _, v := range values {
		switch {
		case strings.EqualFold(v, string(metal3v1.UEFI)):
			modes = append(modes, metal3v1.UEFI)
		case strings.EqualFold(v, string(metal3v1.Legacy)), strings.EqualFold(v, "bios"):
			modes = append(modes, metal3v1.Legacy)
		default:
			return nil, fmt.Errorf("--boot-mode %q: UEFI or legacy", v)
		}
	}
	return modes, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
