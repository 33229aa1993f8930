package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/metalshift/metalshift/agent/configdrive"
	"github.com/metalshift/metalshift/cmd/metalshift/simruntime"
	"github.com/metalshift/metalshift/sim"
	"github.com/metalshift/metalshift/sim/cluster"
	"github.com/metalshift/metalshift/sim/equinix"
	"github.com/metalshift/metalshift/sim/machine"
)

type simEquinixOptions struct {
	listen, metadataListen string
	token, tokenFile       string
	project                string
	timings                equinix.Timings
	ipQuota, rateLimit     int
	rateWindow             time.Duration
	private, public        string
	elastic, ipv6          string
	faults                 string
	console                bool
	backend, binDir        string
	stateDir               string
	addHosts               map[string]string

	// started, when set, gets the running emulator (tests).
	started chan<- *equinix.Server
}

func newSimEquinixCommand() *cobra.Command { return simEquinixCommand(&simEquinixOptions{}) }

// simEquinixCommand binds the command's flags to o.
func simEquinixCommand(o *simEquinixOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "equinix",
		Short: "Serve an emulator of the Equinix Metal API and its metadata service, and print their URLs, a key and a project",
		Long: `Serve an emulator of the Equinix Metal API (under /metal/v1) and its metadata service until
Ctrl-C. The emulator holds devices, IP reservations and their assignments, and walks devices
through queued, provisioning and active with the timings of the flags; docs/equinix.md says
what it serves.

It prints, as shell variables on stdout, the API's URL, the metadata service's URL, the
project it created and, when it chose the key itself, the key:
  eval "$(metalshift sim equinix --project demo &)"
  curl -H "X-Auth-Token: $METAL_AUTH_TOKEN" $METAL_API_URL/projects/$METAL_PROJECT_ID/devices

The ledger, everything that exists (devices, IP reservations and their tags), is at
/_ledger on the API's address, without a key:
  curl -s ${METAL_API_URL%/metal/v1}/_ledger

Devices' addresses come from loopback blocks, so a program on this host can call the metadata
service from a device's address (curl --interface 127.64.0.1 $METAL_METADATA_URL/metadata).

With --faults the API and the devices inject faults as a plan says (the syntax of sim bmc's
--faults): equinix.5xx (status, 500) on requests, equinix.slowprovision (extra time, 5m),
equinix.nohardware and equinix.failed on devices, "<kind>[<hostname>]=..." for one device:
  metalshift sim equinix --faults 'seed=1,equinix.5xx=10%,equinix.failed[worker-1]=@1'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	d := equinix.DefaultTimings
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "Address of the API")
	f.StringVar(&o.metadataListen, "metadata-listen", "127.0.0.1:0", "Address of the metadata service")
	f.StringVar(&o.token, "token", "", "API key the emulator accepts (default: a random one, printed)")
	f.StringVar(&o.tokenFile, "token-file", "", "File holding the API key the emulator accepts")
	f.StringVar(&o.project, "project", "metalshift", "Name of a project to create for the key (empty: none)")
	f.DurationVar(&o.timings.Queued, "queued", d.Queued, "How long a new device stays queued")
	f.DurationVar(&o.timings.Provisioning, "provisioning", d.Provisioning, "How long a device provisions (or reinstalls)")
	f.DurationVar(&o.timings.Deprovisioning, "deprovisioning", d.Deprovisioning, "How long a deleted device deprovisions")
	f.DurationVar(&o.timings.Power, "power", d.Power, "How long a power_on or power_off takes")
	f.IntVar(&o.ipQuota, "ip-quota", equinix.DefaultIPQuota, "Public IPv4 addresses a project holds in reservations before a request needs approval (negative: no quota)")
	f.IntVar(&o.rateLimit, "rate-limit", equinix.DefaultRateLimit, "Requests a key may make in a --rate-window before it gets 429")
	f.DurationVar(&o.rateWindow, "rate-window", equinix.DefaultRateWindow, "The rate limit's window")
	f.StringVar(&o.private, "private-block", equinix.DefaultPrivateBlock.String(), "Block of the devices' private IPv4 addresses")
	f.StringVar(&o.public, "public-block", equinix.DefaultPublicBlock.String(), "Block of the devices' public IPv4 addresses")
	f.StringVar(&o.elastic, "elastic-block", equinix.DefaultElasticBlock.String(), "Block of the IP reservations' IPv4 addresses")
	f.StringVar(&o.ipv6, "ipv6-block", equinix.DefaultIPv6Block.String(), "Block of the IPv6 addresses (reported only)")
	f.StringVar(&o.faults, "faults", "", "Fault plan of the API and the devices, e.g. 'seed=1,equinix.5xx=10%,equinix.failed=@2' (see above)")
	f.BoolVar(&o.console, "console", false, "Print every fault to stderr as it fires, and the machines' consoles")
	f.StringVar(&o.backend, "backend", "light", "What a device boots: light (a simulated machine that runs its iPXE script, installs its disk from the metadata service and runs the installed OS with the cluster simulator), "+
		"qemu (a QEMU VM that iPXE-boots the device's script, the real live image; it reaches the metadata service at "+sim.MetalCloudQEMUMetadataURL+", which a cluster's metadataURL must be) or none")
	f.StringVar(&o.stateDir, "state-dir", "", "With --backend qemu: where the VMs keep their disks and consoles (default: a temporary directory)")
	f.StringVar(&o.binDir, "bin-dir", "", "Directory holding etcd and kube-apiserver, which installed clusters run (default: as `hub up`)")
	f.StringToStringVar(&o.addHosts, "add-host", nil, "Records of the simulated network's DNS, name=IP")
	return cmd
}

func (o *simEquinixOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if o.token != "" && o.tokenFile != "" {
		return fmt.Errorf("--token and --token-file are exclusive")
	}
	token := o.token
	if o.tokenFile != "" {
		data, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(data)); token == "" {
			return fmt.Errorf("--token-file %s is empty", o.tokenFile)
		}
	}
	opts := equinix.Options{Timings: o.timings, IPQuota: o.ipQuota, RateLimit: o.rateLimit, RateWindow: o.rateWindow}
	for _, b := range []struct {
		flag, value string
		dst         *netip.Prefix
	}{{"--private-block", o.private, &opts.PrivateBlock}, {"--public-block", o.public, &opts.PublicBlock},
		{"--elastic-block", o.elastic, &opts.ElasticBlock}, {"--ipv6-block", o.ipv6, &opts.IPv6Block}} {
		p, err := netip.ParsePrefix(b.value)
		if err != nil {
			return fmt.Errorf("%s %q: %w", b.flag, b.value, err)
		}
		*b.dst = p
	}
	if o.rateLimit < 1 {
		return fmt.Errorf("--rate-limit must be at least 1")
	}
	plan, err := parseFaults(o.faults, stderr)
	if err != nil {
		return err
	}
	if plan != nil && o.console {
		plan.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	}
	opts.Faults = plan
	var qemuMachines *sim.MetalCloud
	switch o.backend {
	case "none":
	case "light":
		world, err := cluster.New(cluster.Options{BinDir: o.binDir, Runtime: simruntime.Manager{}, Hosts: o.addHosts, Logf: func(format string, args ...any) {
			fmt.Fprintf(stderr, format+"\n", args...)
		}})
		if err != nil {
			return err
		}
		defer world.Close()
		mopts := sim.MetalCloudOptions{OnDiskBoot: func(ctx context.Context, m *machine.Machine, cd configdrive.Contents) {
			world.Run(ctx, cluster.Machine{ID: m.ID, IP: m.Hardware.NICs[0].IP, UserData: cd.UserData, MetaData: cd.MetaData})
		}}
		if o.console {
			mopts.Console = stderr
		}
		machines := sim.NewMetalCloud(mopts)
		defer machines.Close()
		opts.Machines = machines
	case "qemu":
		dir := o.stateDir
		if dir == "" {
			d, err := os.MkdirTemp("", "metalshift-equinix-vms-")
			if err != nil {
				return err
			}
			defer func() { _ = os.RemoveAll(d) }()
			dir = d
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		mopts := sim.MetalCloudOptions{}
		if o.console {
			mopts.Console = stderr
		}
		machines, err := sim.NewQEMUMetalCloud(mopts, sim.MetalCloudQEMU{StateDir: dir, Forwarder: []string{self, sim.MetadataForwardArg}})
		if err != nil {
			return err
		}
		defer machines.Close()
		opts.Machines = machines
		qemuMachines = machines
		fmt.Fprintf(stderr, "Devices are QEMU VMs; their disks and consoles are in %s\n", dir)
	default:
		return fmt.Errorf("--backend %q: light, qemu or none", o.backend)
	}
	s := equinix.New(opts)
	generated := token == ""
	if generated {
		token = s.NewToken()
	} else {
		s.AddToken(token)
	}
	if err := s.Start(o.listen, o.metadataListen); err != nil {
		return err
	}
	defer s.Close()
	if qemuMachines != nil {
		qemuMachines.SetMetadataAddr(strings.TrimPrefix(s.MetadataURL(), "http://"))
	}
	fmt.Fprintf(stdout, "METAL_API_URL=%s\nMETAL_METADATA_URL=%s\n", s.APIURL(), s.MetadataURL())
	if o.project != "" {
		p, err := s.CreateProject(token, o.project)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "METAL_PROJECT_ID=%s\n", p.ID)
	}
	if generated {
		fmt.Fprintf(stdout, "METAL_AUTH_TOKEN=%s\n", token)
	}
	fmt.Fprintf(stderr, "Serving the Equinix Metal API at %s and its metadata service at %s; Ctrl-C stops them\n", s.APIURL(), s.MetadataURL())
	fmt.Fprintf(stderr, "The ledger (every device, IP reservation and tag): curl -s %s/_ledger\n", strings.TrimSuffix(s.APIURL(), "/metal/v1"))
	if o.started != nil {
		o.started <- s
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(stderr, "Stopping the Equinix Metal emulator")
	return nil
}
