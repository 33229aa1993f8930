package redfish

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/metalshift/metalshift/baremetal/pkg/provisioner"
	rf "github.com/metalshift/metalshift/baremetal/pkg/redfish"
)

// Driver drives one machine over Redfish.
type Driver struct {
	addr   provisioner.Address
	client *rf.Client

	mu         sync.Mutex
	systemPath string
}

var _ provisioner.Provisioner = &Driver{}

// Options tune the driver.
type Options struct {
	// Timeout bounds each request; 0 means 30 seconds.
	Timeout time.Duration
	// TaskPollInterval is how often task monitors are polled.
	TaskPollInterval time.Duration
}

// New returns a driver for a parsed Redfish address.
func New(addr provisioner.Address, insecure bool, creds provisioner.Credentials, opts Options) (*Driver, error) {
	c, err := rf.New(rf.Options{
		Endpoint: addr.Endpoint, Username: creds.Username, Password: creds.Password,
		InsecureSkipVerify: insecure, Timeout: opts.Timeout, TaskPollInterval: opts.TaskPollInterval,
	})
	if err != nil {
		return nil, err
	}
	return &Driver{addr: addr, client: c, systemPath: addr.SystemPath}, nil
}

// translate maps client errors to the provisioner's sentinels.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var netErr net.Error
	switch {
	case errors.Is(err, rf.ErrUnauthorized):
		return fmt.Errorf("%w: %v", provisioner.ErrCredentials, err)
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	var he *rf.HTTPError
	if errors.As(err, &he) && he.Status >= 500 {
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	if strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("%w: %v", provisioner.ErrUnreachable, err)
	}
	return err
}

// system resolves the system path, picking the only system when the
// address names none.
func (d *Driver) system(ctx context.Context) (string, error) {
	d.mu.Lock()
	p := d.systemPath
	d.mu.Unlock()
	if p != "" {
		return p, nil
	}
	paths, err := d.client.SystemPaths(ctx)
	if err != nil {
		return "", translate(err)
	}
	if len(paths) != 1 {
		return "", fmt.Errorf("the BMC has %d systems: name one in the address, e.g. .../redfish/v1/Systems/<id>", len(paths))
	}
	d.mu.Lock()
	d.systemPath = paths[0]
	d.mu.Unlock()
	return paths[0], nil
}

// Register reads the system, which needs working credentials.
func (d *Driver) Register(ctx context.Context) error {
	p, err := d.system(ctx)
	if err != nil {
		return err
	}
	_, _, err = d.client.System(ctx, p)
	return translate(err)
}

// PowerState reads PowerState.
func (d *Driver) PowerState(ctx context.Context) (bool, error) {
	p, err := d.system(ctx)
	if err != nil {
		return false, err
	}
	s, _, err := d.client.System(ctx, p)
	if err != nil {
		return false, translate(err)
	}
	return s.PowerState == "On" || s.PowerState == "PoweringOn", nil
}

func (d *Driver) setPower(ctx context.Context, on bool) error {
	current, err := d.PowerState(ctx)
	if err != nil || current == on {
		return err
	}
	p, _ := d.system(ctx)
	reset := rf.ResetForceOff
	if on {
		reset = rf.ResetOn
	}
	return translate(d.client.Reset(ctx, p, reset))
}

// PowerOn powers the machine on.
func (d *Driver) PowerOn(ctx context.Context) error { return d.setPower(ctx, true) }

// PowerOff powers the machine off, forcibly.
func (d *Driver) PowerOff(ctx context.Context) error { return d.setPower(ctx, false) }

// Reboot restarts the machine, or powers it on when it is off.
func (d *Driver) Reboot(ctx context.Context, soft bool) error {
	on, err := d.PowerState(ctx)
	if err != nil {
		return err
	}
	p, _ := d.system(ctx)
	if !on {
		return translate(d.client.Reset(ctx, p, rf.ResetOn))
	}
	reset := rf.ResetForceRestart
	if soft {
		reset = rf.ResetGracefulRestart
	}
	return translate(d.client.Reset(ctx, p, reset))
}

func bootMode(uefi bool) string {
	if uefi {
		return "UEFI"
	}
	return "Legacy"
}

// BootDeployImage attaches the deploy ISO (virtual media) or sets PXE, for
// one boot, and restarts the machine.
func (d *Driver) BootDeployImage(ctx context.Context, img provisioner.DeployImage, uefi bool) error {
	p, err := d.system(ctx)
	if err != nil {
		return err
	}
	target := "Pxe"
	if d.addr.VirtualMedia {
		target = "Cd"
		sys, _, err := d.client.System(ctx, p)
		if err != nil {
			return translate(err)
		}
		cd, err := d.client.CDPath(ctx, sys)
		if err != nil {
			return fmt.Errorf("%w: %v", provisioner.ErrMedia, err)
		}
		if err := d.client.InsertMedia(ctx, cd, img.ISOURL); err != nil {
			// An answer from the BMC refusing the media is a media error;
			// no answer at all is the BMC being unreachable.
			var he *rf.HTTPError
			if errors.As(err, &he) && he.Status != 401 && he.Status != 403 {
				return fmt.Errorf("%w: %v", provisioner.ErrMedia, err)
			}
			return translate(err)
		}
	}
	if err := d.client.SetBoot(ctx, p, rf.Boot{BootSourceOverrideTarget: target, BootSourceOverrideEnabled: "Once", BootSourceOverrideMode: bootMode(uefi)}); err != nil {
		return translate(err)
	}
	return d.Reboot(ctx, false)
}

// BootDisk ejects virtual media, boots from disk from now on, and powers
// the machine on (restarting it) or off.
func (d *Driver) BootDisk(ctx context.Context, uefi, powerOn bool) error {
	p, err := d.system(ctx)
	if err != nil {
		return err
	}
	if d.addr.VirtualMedia {
		sys, _, err := d.client.System(ctx, p)
		if err != nil {
			return translate(err)
		}
		if cd, err := d.client.CDPath(ctx, sys); err == nil {
			if err := d.client.EjectMedia(ctx, cd); err != nil {
				return translate(err)
			}
		}
	}
	if err := d.client.SetBoot(ctx, p, rf.Boot{BootSourceOverrideTarget: "Hdd", BootSourceOverrideEnabled: "Continuous", BootSourceOverrideMode: bootMode(uefi)}); err != nil {
		return translate(err)
	}
	if powerOn {
		return d.Reboot(ctx, false)
	}
	return d.PowerOff(ctx)
}
