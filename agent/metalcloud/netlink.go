//go:build linux

package metalcloud

import (
	"context"

	"github.com/metalshift/metalshift/agent/boot"
)

// Netlink is the live image's NetworkConfigurator: it applies the Plan of
// a Network with agent/boot's netlink configuration (boot.ConfigureBond).
// The NICs' own addresses from the live image's DHCP move to the bond and
// stay next to the metadata's.
type Netlink struct {
	// Logf receives what is done; nil discards it.
	Logf func(format string, args ...any)
}

// Configure implements NetworkConfigurator.
func (c Netlink) Configure(_ context.Context, n Network) error {
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return boot.ConfigureBond(Plan(n), logf)
}
