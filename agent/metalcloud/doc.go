// Package metalcloud is the host side of a metal cloud's machine booted
// from metalshift's live image (Equinix Metal's custom_ipxe): what
// Afterburn and coreos-installer do for RHCOS on such a cloud. Given a
// boot configuration with a MetalCloud section (deployapi.MetalCloud), Run
// reads the machine's metadata from the cloud's metadata service, which
// knows the machine by the source address of the call; configures the
// bond and the addresses the metadata lists, before anything else goes over
// the network; reads the user data, which must be an Ignition config;
// writes the OS image to the install disk (chosen as the deploy agent
// chooses one without hints); and writes a config drive with the user data
// and the machine's identity (uuid, name, local-hostname, and providerid
// equinixmetal://<device ID>), which the installed OS reads at first boot.
// Then the caller reboots into the disk.
//
// The network is applied through a NetworkConfigurator. The simulator uses
// Recorder, which applies nothing and records what it was asked; the live
// image uses Netlink, which applies Plan (the bond, the addresses, the
// routes through the gateways) with agent/boot's netlink configuration.
//
// Like agent/deploy it imports no controller package: only the wire
// contracts (api/deploy/v1, api/equinixmetal/v1), agent/deploy,
// agent/configdrive and the live image's init, agent/boot.
package metalcloud
