// Package sim assembles the simulated lab behind the protocol boundary:
// machines (sim/machine) behind a Redfish BMC emulator (sim/redfish), with
// firmware that boots what the BMC tells it the way real firmware would —
// it downloads the virtual-media ISO or chain-loads iPXE from the
// provisioning network's boot server, and runs what the image carries (the
// real deploy agent, against the machine's simulated disks) — or boots the
// disk. Controllers only ever see Redfish, IPMI and HTTP. MetalCloud boots
// such machines for the devices of the Equinix Metal emulator (sim/equinix),
// which install themselves from its metadata service.
package sim
