// Package factory builds the driver for a BMC address: Redfish for the
// redfish schemes, IPMI for ipmi://, both connecting only where the hub's
// BMC egress policy allows.
package factory

import (
	"fmt"
	"time"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/egress"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner/ipmi"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner/redfish"
)

// Options tune the drivers.
type Options struct {
	// Timeout bounds each BMC request; 0 means the driver's default.
	Timeout time.Duration
	// TaskPollInterval is how often Redfish task monitors are polled.
	TaskPollInterval time.Duration
	// Egress is where BMC connections may go; the zero value is the
	// production policy (no loopback, link-local, ...).
	Egress egress.Policy
}

// New returns a provisioner.Factory with the given options.
func New(opts Options) provisioner.Factory {
	return provisioner.FactoryFunc(func(address string, insecure bool, creds provisioner.Credentials) (provisioner.Provisioner, error) {
		addr, err := provisioner.ParseAddress(address)
		if err != nil {
			return nil, err
		}
		switch addr.Driver {
		case provisioner.DriverRedfish:
			return redfish.New(addr, insecure, creds, redfish.Options{Timeout: opts.Timeout, TaskPollInterval: opts.TaskPollInterval, Egress: opts.Egress})
		case provisioner.DriverIPMI:
			return ipmi.New(addr, creds, ipmi.Options{Timeout: opts.Timeout, Egress: opts.Egress})
		}
		return nil, fmt.Errorf("no driver for BMC address %q", metal3v1.RedactBMCAddress(address))
	})
}
