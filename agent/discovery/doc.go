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
//
// The agent outlives the service: a hub restart or a rolling update of its
// manager is waited for. Every call that gets no answer, a 5xx, 408 or 429
// is tried again with a capped, jittered exponential backoff (link.go),
// registration and polls for as long as the agent runs, the install role's
// calls for up to Options.ServiceWait; losing the service and getting it
// back are logged once each, and an install the service stayed away from
// for that long is left without a Failed report, to be run again when the
// service hands the step out again.
package discovery
