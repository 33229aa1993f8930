package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	rf "github.com/metalshift/metalshift/hostengine/pkg/redfish"
	"github.com/metalshift/metalshift/sim"
)

// bootISO boots every machine of lab from the ISO at iso the way a person
// does at a BMC, through the lab's own Redfish endpoint with metalshift's
// Redfish client: insert the ISO in the virtual CD
// (VirtualMedia.InsertMedia, ejecting what another boot left), set a
// one-time boot override to Cd (PATCH Boot, in the machine's firmware
// mode) and power on (ComputerSystem.Reset On; ForceRestart for a machine
// already on).
func bootISO(ctx context.Context, lab *sim.Lab, iso string, out io.Writer) error {
	// The lab is this command's own, usually on loopback.
	c, err := rf.New(rf.Options{Endpoint: "http://" + lab.Endpoint(), Username: lab.Opts.Username, Password: lab.Opts.Password,
		Egress: egress.Policy{AllowLoopback: true}})
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx)) //nolint:errcheck // ending the session is best effort
	for _, m := range lab.Machines {
		if err := bootSystemISO(ctx, c, "/redfish/v1/Systems/"+m.ID, iso); err != nil {
			return fmt.Errorf("booting %s from %s: %w", m.ID, redactURL(iso), err)
		}
		fmt.Fprintf(out, "%s: inserted %s in the virtual CD, boot override Cd (once), powered on\n", m.ID, redactURL(iso))
	}
	return nil
}

// bootSystemISO boots the Redfish system at path from iso.
func bootSystemISO(ctx context.Context, c *rf.Client, path, iso string) error {
	sys, _, err := c.System(ctx, path)
	if err != nil {
		return err
	}
	cd, err := c.CDPath(ctx, sys)
	if err != nil {
		return err
	}
	// InsertMedia ejects another image first and is then called again.
	for range 2 {
		monitor, err := c.InsertMedia(ctx, cd, iso)
		if err != nil {
			return err
		}
		if err := waitTask(ctx, c, monitor); err != nil {
			return err
		}
	}
	mode := sys.Boot.BootSourceOverrideMode
	if mode == "" {
		mode = "UEFI"
	}
	monitor, err := c.SetBoot(ctx, path, rf.Boot{BootSourceOverrideTarget: "Cd", BootSourceOverrideEnabled: "Once", BootSourceOverrideMode: mode})
	if err != nil {
		return err
	}
	if err := waitTask(ctx, c, monitor); err != nil {
		return err
	}
	reset := rf.ResetOn
	if strings.EqualFold(sys.PowerState, "On") {
		reset = rf.ResetForceRestart
	}
	monitor, err = c.Reset(ctx, path, reset)
	if err != nil {
		return err
	}
	return waitTask(ctx, c, monitor)
}

// waitTask polls a Redfish task monitor until the task ends; "" is a
// change the BMC already made.
func waitTask(ctx context.Context, c *rf.Client, monitor string) error {
	for monitor != "" {
		running, err := c.Task(ctx, monitor)
		if err != nil || !running {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// redactURL drops the query of a URL (image URLs carry signatures).
func redactURL(u string) string {
	base, _, found := strings.Cut(u, "?")
	if found {
		return base + "?…"
	}
	return base
}
