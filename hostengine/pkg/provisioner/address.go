package provisioner

import (
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
)

// Driver names.
const (
	DriverRedfish = metal3v1.BMCDriverRedfish
	DriverIPMI    = metal3v1.BMCDriverIPMI
)

// Address is a parsed BMC address.
type Address = metal3v1.BMCAddress

// ParseAddress parses a BareMetalHost BMC address with the one definition
// of the schemes the engine supports (metal3v1.ParseBMCAddress, which the
// admission webhook and the installer apply too). The error says what a
// valid address looks like.
func ParseAddress(address string) (Address, error) { return metal3v1.ParseBMCAddress(address) }
