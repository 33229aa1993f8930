package main

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/metalshift/metalshift/agent/deploy"
	"github.com/metalshift/metalshift/agent/host"
	"github.com/metalshift/metalshift/agent/metalcloud"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// metalCloudRole is the metal cloud installer (agent/metalcloud) on a
// machine of the cloud: it reads the machine's metadata, configures its
// bond and addresses with netlink, writes the image and the config drive
// to its disk, and reboots into it.
func metalCloudRole(cfg deployapi.BootConfig, paths host.Paths) error {
	disks, err := host.Disks(paths)
	if err != nil {
		return err
	}
	devs := make([]deploy.BlockDevice, 0, len(disks))
	for _, d := range disks {
		devs = append(devs, d)
	}
	httpClient, err := client(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = metalcloud.Run(ctx, metalcloud.Options{
		Config: cfg, Devices: devs, HTTP: httpClient, Logf: log.Printf,
		Network: metalcloud.Netlink{Logf: log.Printf},
	})
	if err != nil {
		return fmt.Errorf("metal cloud installer: %w", err)
	}
	return reboot(ctx)
}
