package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metalshift/metalshift/agent/deploy"
	"github.com/metalshift/metalshift/agent/discovery"
	"github.com/metalshift/metalshift/agent/host"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// discoveryRole runs the discovery agent of the agent-based install on
// this machine until it is rebooted into the installed OS.
func discoveryRole(cfg deployapi.Discovery, paths host.Paths) error {
	opts, err := discoveryOptions(cfg, paths)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Printf("Discovery agent for host %s, infra-env %s, agent service %s", opts.HostID, cfg.InfraEnvID, cfg.ServiceURL)
	return discovery.Run(ctx, opts)
}

// discoveryOptions are the discovery agent's options on this machine.
func discoveryOptions(cfg deployapi.Discovery, paths host.Paths) (discovery.Options, error) {
	hostID, err := host.MachineUUID(paths)
	if err != nil {
		return discovery.Options{}, err
	}
	disks, err := host.Disks(paths)
	if err != nil {
		return discovery.Options{}, err
	}
	devs := make([]deploy.BlockDevice, 0, len(disks))
	for _, d := range disks {
		devs = append(devs, d)
	}
	httpClient, err := discoveryClient(cfg)
	if err != nil {
		return discovery.Options{}, err
	}
	return discovery.Options{
		Config:  cfg,
		HostID:  hostID,
		Devices: devs,
		HTTP:    httpClient,
		Logf:    log.Printf,
		Inventory: func() (*assistedapi.Inventory, error) {
			return readInventory(paths)
		},
		Reboot:  reboot,
		Version: agentVersion(),
	}, nil
}

// discoveryClient trusts the service's CA and the InfraEnv's trust bundle
// besides the system's roots, and goes through the InfraEnv's proxy.
func discoveryClient(cfg deployapi.Discovery) (*http.Client, error) {
	t, err := deploy.Transport(strings.TrimSpace(cfg.CACert + "\n" + cfg.AdditionalTrustBundle))
	if err != nil {
		return nil, err
	}
	// http.ProxyFromEnvironment reads the environment once, on first use:
	// nothing was requested before the agent role starts.
	for k, v := range map[string]string{"HTTP_PROXY": cfg.HTTPProxy, "HTTPS_PROXY": cfg.HTTPSProxy, "NO_PROXY": cfg.NoProxy} {
		if v != "" {
			if err := os.Setenv(k, v); err != nil {
				return nil, err
			}
		}
	}
	t.Proxy = http.ProxyFromEnvironment
	return &http.Client{Transport: t}, nil
}

// reboot flushes the disks and restarts the machine: with the reboot
// system call as the live image's init, else with reboot(8).
func reboot(ctx context.Context) error {
	unix.Sync()
	if os.Getpid() == 1 {
		return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	}
	if out, err := exec.CommandContext(ctx, "reboot").CombinedOutput(); err != nil {
		return fmt.Errorf("reboot: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// agentVersion is the discovery_agent_version the agent registers with:
// its module version, or the commit it was built from.
func agentVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "metalshift-agent"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 && (v == "" || v == "(devel)") {
			v = s.Value[:12]
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return "metalshift-agent/" + v
}

// readInventory is the inventory step's: the machine as agent/host reads
// it, with the addresses and default routes the live system has.
func readInventory(paths host.Paths) (*assistedapi.Inventory, error) {
	inv, err := host.ReadInventory(paths)
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	out := discovery.FromDeployInventory(inv, hostname)
	for i := range out.Interfaces {
		itf := &out.Interfaces[i]
		itf.IPV4Addresses, itf.IPV6Addresses = host.Addresses(itf.Name)
		if n, err := net.InterfaceByName(itf.Name); err == nil {
			itf.Mtu = int64(n.MTU)
		}
	}
	out.Routes = host.DefaultRoutes(paths)
	out.Timestamp = time.Now().Unix()
	return out, nil
}
