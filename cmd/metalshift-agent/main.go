// Command metalshift-agent is the agent that runs on a machine the hub
// provisions, booted from the deploy image: it asks the host engine's
// deploy server for work (write an image and a config drive, clean the
// disks) on the machine's real block devices, and reports. Booted from an
// InfraEnv's discovery image (the boot configuration has a discovery
// section) it is the discovery agent of the agent-based install instead:
// it registers with the agent service, runs its steps and installs the
// host (agent/discovery). Booted by a metal cloud's device (a metalCloud
// section) it is the metal cloud installer (agent/metalcloud), which
// configures the network the cloud's metadata service describes. `inventory` prints what it sees of the machine.
// It is one static binary (CGO off).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/metalshift/metalshift/agent/boot"
	"github.com/metalshift/metalshift/agent/deploy"
	"github.com/metalshift/metalshift/agent/discovery"
	"github.com/metalshift/metalshift/agent/host"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

func main() {
	if os.Getpid() == 1 {
		initMain()
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "metalshift-agent:", err)
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(args []string) error {
	fs := flag.NewFlagSet("metalshift-agent", flag.ContinueOnError)
	paths := host.Linux
	fs.StringVar(&paths.Sys, "sysfs", paths.Sys, "Where sysfs is mounted")
	fs.StringVar(&paths.Proc, "procfs", paths.Proc, "Where procfs is mounted")
	fs.StringVar(&paths.Dev, "dev", paths.Dev, "Where the device nodes are")
	config := fs.String("config", deployapi.BootConfigFile, "Boot configuration (JSON), as the live image's host initrd puts it")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: metalshift-agent [flags] [deploy|discovery|metalcloud|inventory]\n\n"+
			"  deploy      ask the deploy server for work and do it (default without a discovery section)\n"+
			"  discovery   register with the agent service, run its steps, install the host (default with one)\n"+
			"  metalcloud  configure the network from the metadata service, write the image and the\n"+
			"              config drive, reboot into the disk (default with a metalCloud section)\n"+
			"  inventory   print what the agent sees of this machine (JSON)\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	role := ""
	if fs.NArg() > 0 {
		role = fs.Arg(0)
	}
	switch role {
	case "inventory":
		inv, err := host.ReadInventory(paths)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(inv)
	case "", "deploy", "discovery", "metalcloud":
		cfg, err := bootConfig(*config)
		if err != nil {
			return err
		}
		switch {
		case role != "" && role != "metalcloud" && cfg.MetalCloud != nil:
			return fmt.Errorf("%s is a metal cloud installer's configuration: run the metalcloud role", *config)
		case role == "metalcloud" && cfg.MetalCloud == nil:
			return fmt.Errorf("%s has no metalCloud section", *config)
		case role == "deploy" && cfg.Discovery != nil && cfg.Lookup == nil:
			return fmt.Errorf("%s is a discovery image's configuration: run the discovery role", *config)
		case role == "discovery" && cfg.Discovery == nil:
			return fmt.Errorf("%s has no discovery section: run the deploy role", *config)
		}
		return agentRole(cfg, paths)
	default:
		return usageError{fmt.Errorf("unknown role %q: deploy, discovery, metalcloud or inventory", role)}
	}
}

// agentRole runs the metal cloud installer when the boot configuration has
// a metalCloud section, the discovery agent when it has a discovery
// section, else the deploy agent. With a lookup section (the converged
// flow) it runs the deploy agent, which finds its host by MAC address; the
// discovery agent then starts only as the custom deploy method
// start_assisted_install.
func agentRole(cfg deployapi.BootConfig, paths host.Paths) error {
	if cfg.MetalCloud != nil {
		return metalCloudRole(cfg, paths)
	}
	if cfg.Discovery != nil && cfg.Lookup == nil {
		return discoveryRole(*cfg.Discovery, paths)
	}
	return deployRole(cfg, paths)
}

// bootConfig reads the boot configuration from file.
func bootConfig(file string) (deployapi.BootConfig, error) {
	var cfg deployapi.BootConfig
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) && file == deployapi.BootConfigFile {
		return cfg, fmt.Errorf("no boot configuration at %s: this image was booted without a host's configuration; "+
			"boot the URL the host engine gives the host (its ISO or iPXE script), not the base image", file)
	}
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", file, err)
	}
	if mc := cfg.MetalCloud; mc != nil {
		if mc.MetadataURL == "" || mc.Image.URL == "" {
			return cfg, fmt.Errorf("%s: metalCloud.metadataURL and metalCloud.image.url are required", file)
		}
		return cfg, nil
	}
	if d := cfg.Discovery; d != nil {
		if d.ServiceURL == "" || d.InfraEnvID == "" || d.Token == "" {
			return cfg, fmt.Errorf("%s: discovery.serviceURL, discovery.infraEnvID and discovery.token are required", file)
		}
	}
	if l := cfg.Lookup; l != nil {
		if l.EngineURL == "" || l.Scope == "" || l.Token == "" {
			return cfg, fmt.Errorf("%s: lookup.engineURL, lookup.scope and lookup.token are required", file)
		}
		return cfg, nil
	}
	if cfg.Discovery != nil {
		return cfg, nil
	}
	if cfg.EngineURL == "" || cfg.HostID == "" || cfg.Ticket == "" {
		return cfg, fmt.Errorf("%s: engineURL, hostID and ticket are required", file)
	}
	return cfg, nil
}

// initMain runs the agent as the live image's init: it prepares the
// machine, then runs the deploy or discovery role until the machine is
// powered off or rebooted.
// It never returns: PID 1 exiting panics the kernel.
func initMain() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("metalshift-agent: ")
	go boot.Reap()
	netcfg, netErr := initNetwork()
	if netErr != nil {
		log.Printf("Network: %v", netErr)
	}
	if inv, err := host.ReadInventory(host.Linux); err == nil {
		log.Printf("Machine: %s %s, %d CPUs, %d MiB, boot mode %s, %d NICs, %d disks", inv.SystemVendor.Manufacturer,
			inv.SystemVendor.ProductName, inv.CPU.Count, inv.MemoryBytes>>20, inv.BootMode, len(inv.NICs), len(inv.Disks))
		if b, err := json.Marshal(inv); err == nil {
			log.Printf("Inventory: %s", b)
		}
	}
	overridden := false
	for {
		if netErr != nil { // a switch port that came up late, a DHCP server that was down
			if netErr = boot.Network(context.Background(), log.Printf, netcfg); netErr != nil {
				log.Printf("Network: %v; trying again in 30s", netErr)
				time.Sleep(30 * time.Second)
				continue
			}
		}
		cfg, err := bootConfig(deployapi.BootConfigFile)
		// The live environment is this machine's root: the InfraEnv's
		// ignitionConfigOverride applies to it, once.
		if d := cfg.Discovery; err == nil && d != nil && d.IgnitionConfigOverride != "" && !overridden {
			overridden = true
			if err := boot.ApplyIgnition("/", []byte(d.IgnitionConfigOverride), log.Printf); err != nil {
				log.Printf("Applying the InfraEnv's ignitionConfigOverride: %v", err)
			}
		}
		if err == nil {
			err = agentRole(cfg, host.Linux)
		}
		log.Printf("%v; trying again in 30s", err)
		time.Sleep(30 * time.Second)
	}
}

// initNetwork mounts the kernel's filesystems, loads the modules and
// configures the network with the host's network data, or for a discovery
// image with its InfraEnv's static network for this machine's NICs. The
// configuration is returned for later attempts.
func initNetwork() (*deployapi.NetworkConfig, error) {
	prepErr := boot.Prepare(log.Printf)
	// The host initrd is unpacked before init runs: the configuration is
	// there before anything is mounted.
	var netcfg *deployapi.NetworkConfig
	cfg, err := bootConfig(deployapi.BootConfigFile)
	switch {
	case err != nil:
	case cfg.Discovery != nil && len(cfg.Discovery.StaticNetwork) > 0:
		if netcfg, err = discovery.StaticNetwork(cfg.Discovery.StaticNetwork, host.NICMACs()); err != nil {
			log.Printf("Ignoring the static network configuration: %v", err)
		} else if netcfg == nil {
			log.Printf("No static network configuration of the InfraEnv names this machine's MAC addresses: DHCP")
		}
	case cfg.NetworkData != "":
		if netcfg, err = deployapi.ParseNetworkConfig([]byte(cfg.NetworkData)); err != nil {
			log.Printf("Ignoring the network data: %v", err)
		}
	}
	if prepErr != nil {
		return netcfg, prepErr
	}
	return netcfg, boot.Network(context.Background(), log.Printf, netcfg)
}

func deployRole(cfg deployapi.BootConfig, paths host.Paths) error {
	disks, err := host.Disks(paths)
	if err != nil {
		return err
	}
	devs := make([]deploy.BlockDevice, 0, len(disks))
	for _, d := range disks {
		i := d.Info()
		log.Printf("Disk %s: %d bytes, model %q, serial %q, WWN %q, HCTL %q, rotational %t", i.Name, i.SizeBytes, i.Model, i.SerialNumber, i.WWN, i.HCTL, i.Rotational)
		devs = append(devs, d)
	}
	httpClient, err := client(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := deploy.Options{Config: cfg, Devices: devs, HTTP: httpClient, Logf: log.Printf,
		Inventory: func() (*host.Inventory, error) { return host.ReadInventory(paths) }}
	if cfg.Lookup != nil {
		log.Printf("Deploy agent looking its host up at the deploy server %s", cfg.Lookup.EngineURL)
		opts.MACs = host.NICMACs()
		if cfg.Discovery != nil {
			dopts, err := discoveryOptions(*cfg.Discovery, paths)
			if err != nil {
				return err
			}
			opts.CustomDeploy = discovery.CustomDeploy(dopts)
		}
	} else {
		log.Printf("Deploy agent for host %s, deploy server %s", cfg.HostID, cfg.EngineURL)
	}
	return deploy.Run(ctx, opts)
}

// client trusts cfg.CACert besides the system's roots when the deploy
// server serves https. No overall timeout: an image download takes what it
// takes.
func client(cfg deployapi.BootConfig) (*http.Client, error) {
	t, err := deploy.Transport(cfg.CACert)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: t}, nil
}
