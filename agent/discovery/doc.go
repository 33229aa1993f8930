// Package discovery is the discovery role of the agent, for the
// agent-based install: on a host booted from an InfraEnv's discovery image
// it registers with the agent service (api/assisted/v2) under the
// machine's UUID, then polls for instructions and runs them one at a time —
// inventory, connectivity, NTP, DNS and installation disk speed checks, and
// the install itself — and replies to each, as upstream's
// assisted-installer-agent does.
//
// The install step reports upstream's stages for the host's role, fetches
// the host's Ignition from the service, writes the OS image and a config
// drive holding that Ignition to the installation disk (with agent/deploy's
// writers), and reboots the machine. The bootstrap host of a multi-node
// cluster first runs the bootstrap Ignition in the live environment and
// waits for the control plane. Block devices, the inventory, the reboot and
// the bootstrap runner are parameters, so the simulator runs this same code
// against its synthetic machines.
package discovery
