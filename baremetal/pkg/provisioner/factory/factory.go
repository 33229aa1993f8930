// Package factory builds the driver for a BMC address: Redfish for the
// redfish schemes, IPMI for ipmi://.
package factory

import (
	"fmt"
	"time"

	"github.com/metalshift/metalshift/baremetal/pkg/provisioner"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner/ipmi"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner/redfish"
)

// Options tune the drivers.
type Options struct {
	// Timeout bounds each BMC request; 0 means the driver's default.
	Timeout time.Duration
	// TaskPollInterval is how often Redfish task monitors are polled.
	TaskPollInterval time.Duration
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
			return redfish.New(addr, insecure, creds, redfish.Options{Timeout: opts.Timeout, TaskPollInterval: opts.TaskPollInterval})
		case provisioner.DriverIPMI:
			return ipmi.New(addr, creds, opts.Timeout)
		}
		return nil, fmt.Errorf("no driver for BMC address %q", address)
	})
}
