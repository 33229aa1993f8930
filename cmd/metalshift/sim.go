package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/cmd/metalshift/simruntime"
	"github.com/metalshift/metalshift/localcp"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/cluster"
	"github.com/metalshift/metalshift/sim/fault"
)

type simBMCOptions struct {
	hosts                       int
	hostLabels, hostAnnotations map[string]string
	addHosts                    map[string]string
	listen                      string
	bootURL                     string
	caFile                      string
	hubDir                      string
	hubDirSet                   bool // --hub-dir given: its CA is trusted
	namespace                   string
	virtualMedia                bool
	manifests                   string
	username                    string
	password                    string
	binDir                      string
	console                     bool
	backend                     string
	stateDir                    string
	bootModes                   []string
	legacyBMC                   string
	bootISO                     string
	namePrefix                  string
	subnet                      string
	macOctet                    uint8
	faults                      string
	apiServer                   string
}

func newSimCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run simulated hardware behind real protocols (Redfish BMCs, machines that boot what they are told, the Equinix Metal API)",
	}
	o := &simBMCOptions{}
	bmc := &cobra.Command{
		Use:   "bmc",
		Short: "Serve simulated machines behind one Redfish endpoint and print a BareMetalHost and Secret per machine, or boot them from an ISO",
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
  metalshift sim bmc --backend qemu --hosts 2 --boot-mode UEFI,legacy --legacy-bmc ipmi

With --boot-iso the machines boot an ISO as a person would at their BMCs, without a
BareMetalHost: once they are served, each gets the ISO in its virtual CD
(VirtualMedia.InsertMedia), a one-time boot override to Cd and a power on
(ComputerSystem.Reset), through the lab's own Redfish endpoint. An InfraEnv's discovery
ISO boots the discovery agent, which registers an Agent with the hub's agent service:
  url=$(kubectl -n sno get infraenv sno -o jsonpath='{.status.isoDownloadURL}')
  metalshift sim bmc --hosts 1 --boot-iso "$url" --name-prefix sno --subnet 127.43.1 --mac-octet 0x31 &
Machines of labs running side by side need their own --name-prefix, --subnet and
--mac-octet (the octet also tells their UUIDs, the Agents' names, apart).

With --api-server in-memory the clusters the machines install serve their API from this
process (sim/kubeapi, the fleet fidelity level) instead of a kube-apiserver each, at the same
address with the same certificates: many installed clusters fit on one machine.
  metalshift sim bmc --hosts 30 --api-server in-memory --manifests hosts.yaml &

With --faults the BMCs and machines inject faults as a plan says: items separated by commas,
"seed=<n>" and "<kind>=<when>[:<param>]" (or "<kind>[<machine>]=..." for one machine and its
BMC), <when> a rate (10%) or a schedule counted in each BMC's or machine's own decisions (@3:
the third only; 2-5; 4-: from the fourth on):
  metalshift sim bmc --hosts 3 --faults 'seed=1234,redfish.5xx=10%,redfish.hang[host-1]=@5,machine.netdrop=@20:30s'
Kinds, with their :<param> and its default: redfish.5xx (status, 500), redfish.hang (longest
hold, 10m), redfish.reset, redfish.slowpower (delay, 10s), redfish.media, redfish.task,
ipmi.fail, ipmi.drop, ipmi.ignore, machine.powerloss (bytes written first, 512KiB), machine.netdrop
(duration, 10s); docs/host-engine.md ("Fault plans") says what each does. Without a seed one
is chosen and printed: give it to replay the same faults.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.hubDirSet = cmd.Flags().Changed("hub-dir")
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := bmc.Flags()
	f.IntVar(&o.hosts, "hosts", 3, "Number of machines")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "Address of the Redfish endpoint")
	f.StringVar(&o.bootURL, "boot-url", "", "Boot server for network boot (default: the deploy server's plain http for network boot, of the hub in --hub-dir)")
	f.StringVar(&o.caFile, "ca-file", "", "CA the machines' BMCs and firmware trust for the hub's servers (virtual media, network boot over https), read at each connection "+
		"(default: the CA of the hub in --hub-dir when that flag is given; without either the BMCs verify no server, as BMCs given no CA)")
	f.StringVar(&o.hubDir, "hub-dir", localcp.DefaultDir(), "Hub whose deploy server is the boot server, and whose CA the BMCs trust (its CA is read at each connection: the hub may start later)")
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
	f.StringVar(&o.bootISO, "boot-iso", "", "Boot every machine once from the ISO at this URL through its BMC (virtual media, one-time boot override to Cd, power on); the manifests are then written only with --manifests")
	f.StringVar(&o.namePrefix, "name-prefix", "host", "Name the machines <prefix>-<n> (and their BareMetalHosts)")
	f.StringVar(&o.subnet, "subnet", "192.0.2", "First three octets of the machines' IP addresses")
	f.Uint8Var(&o.macOctet, "mac-octet", 0x6d, "Fourth octet of the machines' MAC addresses, also part of their UUIDs (labs side by side need different ones)")
	f.StringVar(&o.binDir, "bin-dir", "", "Directory holding etcd and kube-apiserver, which installed clusters run (default: as `hub up`)")
	f.StringToStringVar(&o.hostLabels, "host-label", nil, "Labels of the printed BareMetalHosts, key=value (e.g. infraenvs.agent-install.openshift.io=<InfraEnv> for the agent-based install)")
	f.StringToStringVar(&o.hostAnnotations, "host-annotation", nil, "Annotations of the printed BareMetalHosts, key=value (e.g. bmac.agent-install.openshift.io/role=master)")
	f.StringVar(&o.faults, "faults", "", "Fault plan of the BMCs and machines, e.g. 'seed=1234,redfish.5xx=10%,machine.netdrop=@20:30s' (see above)")
	f.StringVar(&o.apiServer, "api-server", apiServerReal, "What serves each installed cluster's API: "+apiServerReal+" (a kube-apiserver process each, sharing one etcd) or "+
		string(cluster.InMemoryAPIServer)+" (sim/kubeapi, in this process: the fleet fidelity level, for many clusters; no admission, RBAC or server-side apply, and the bare-metal operator does not run)")
	f.StringToStringVar(&o.addHosts, "add-host", nil, "Records of the simulated network's DNS, name=IP: the names machines reach the hub's servers at (e.g. the ignition server's, which its certificate carries)")
	cmd.AddCommand(bmc, newSimImageCommand(), newSimEquinixCommand())
	return cmd
}

func (o *simBMCOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if o.hosts < 1 {
		return fmt.Errorf("--hosts must be at least 1")
	}
	bootURL := o.bootURL
	if bootURL == "" {
		if st, err := localcp.ReadState(o.hubDir); err == nil && st.Ports.DeployBoot != 0 {
			bootURL = "http://127.0.0.1:" + strconv.Itoa(st.Ports.DeployBoot)
		}
	}
	caFile := o.caFile
	if caFile == "" && o.hubDirSet {
		caFile = localcp.CAPath(o.hubDir)
	}
	modes, err := parseBootModes(o.bootModes)
	if err != nil {
		return err
	}
	plan, err := parseFaults(o.faults, stderr)
	if err != nil {
		return err
	}
	opts := sim.LabOptions{Hosts: o.hosts, Username: o.username, Password: o.password, BootURL: bootURL, CAFile: caFile, UnverifiedMedia: caFile == "",
		Backend: o.backend, StateDir: o.stateDir, BootModes: modes, LegacyBMC: o.legacyBMC,
		NamePrefix: o.namePrefix, Subnet: o.subnet, MACOctet: o.macOctet, HostLabels: o.hostLabels, HostAnnotations: o.hostAnnotations,
		Faults: plan}
	if o.backend == sim.BackendQEMU && len(o.addHosts) > 0 {
		return fmt.Errorf("--add-host is for the light backend's simulated network; QEMU VMs resolve names with the host's DNS")
	}
	apiServer, err := parseAPIServer(o.apiServer)
	if err != nil {
		return err
	}
	if o.backend != sim.BackendQEMU { // VMs run their installed OS themselves
		world, err := cluster.New(cluster.Options{BinDir: o.binDir, APIServer: apiServer, Runtime: simruntime.Manager{}, Hosts: o.addHosts, Logf: func(format string, args ...any) {
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
		if plan != nil {
			plan.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
		}
	}
	lab := sim.NewLab(opts)
	if err := lab.Start(o.listen); err != nil {
		return err
	}
	defer lab.Close()
	if err := o.writeManifests(lab, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Serving %d simulated machines at redfish endpoint http://%s (boot server: %s); Ctrl-C stops them\n",
		o.hosts, lab.Endpoint(), orNone(bootURL))
	if caFile == "" {
		fmt.Fprintln(stderr, "Their BMCs verify no https server (no --ca-file or --hub-dir), as BMCs given no CA; their agents verify the hub's servers with the CA of their boot configuration")
	} else {
		fmt.Fprintf(stderr, "Their BMCs and firmware trust the CA in %s\n", caFile)
	}
	if o.bootISO != "" {
		if err := bootISO(ctx, lab, o.bootISO, stderr); err != nil {
			return err
		}
	}
	if lab.QEMU != nil {
		fmt.Fprintf(stderr, "QEMU VMs keep their disks, consoles (console.log) and logs in %s/<machine>\n", lab.Opts.StateDir)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(stderr, "Stopping the simulated machines")
	return nil
}

// writeManifests writes a Secret and a BareMetalHost per machine to
// --manifests, or to stdout unless the machines boot an ISO themselves.
func (o *simBMCOptions) writeManifests(lab *sim.Lab, stdout, stderr io.Writer) error {
	if o.manifests == "" && o.bootISO != "" {
		return nil
	}
	data, err := lab.Manifests(o.namespace, o.virtualMedia)
	if err != nil {
		return err
	}
	if o.manifests == "" {
		_, err := stdout.Write(data)
		return err
	}
	if err := writeWhole(o.manifests, data); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Wrote a Secret and a BareMetalHost for each of %d machines to %s\n", o.hosts, o.manifests)
	return nil
}

// writeWhole writes data to path so that a reader waiting for the file
// (a script, a test) never reads it half written: to a file beside it,
// renamed into place once complete.
func writeWhole(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // once renamed, there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// parseFaults reads --faults (nil when empty) and prints the plan with its
// seed, chosen at random unless given, so that the run can be replayed.
func parseFaults(value string, stderr io.Writer) (*fault.Plan, error) {
	plan, err := fault.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	if plan.Empty() {
		return nil, nil
	}
	chosen := plan.EnsureSeed()
	fmt.Fprintf(stderr, "Fault plan: %s\n", plan)
	if chosen {
		fmt.Fprintf(stderr, "The seed was chosen at random: replay these faults with --faults '%s'\n", plan)
	}
	return plan, nil
}

// apiServerReal is --api-server's name for cluster.KubeAPIServer.
const apiServerReal = "kube-apiserver"

// parseAPIServer reads --api-server.
func parseAPIServer(v string) (cluster.APIServer, error) {
	switch v {
	case apiServerReal:
		return cluster.KubeAPIServer, nil
	case string(cluster.InMemoryAPIServer):
		return cluster.InMemoryAPIServer, nil
	}
	return "", fmt.Errorf("--api-server %q: %s or %s", v, apiServerReal, cluster.InMemoryAPIServer)
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
