// Package equinix is an emulator of the Equinix Metal API, the metal
// cloud metalshift installs on without a live service to test against (it
// was sunset in 2026). It serves, under /metal/v1 and with the published
// API's JSON (package api/equinixmetal/v1):
//
//   - X-Auth-Token authentication: 401 without a known key, 403 for a
//     project (and its devices and addresses) the key does not own;
//   - projects; devices created in a metro (or a facility) with a plan and
//     an operating system (custom_ipxe needs an iPXE script URL or iPXE
//     userdata), read, listed a page at a time (page, per_page, the meta
//     block) and by tag, updated, deleted (force_delete), and their power
//     and reinstall actions;
//   - the device state machine: queued → provisioning → active, a delete
//     through deprovisioning to deleted (then 404), power actions through
//     powering_off / powering_on, a reinstall through reinstalling; each
//     transition after a duration of Options.Timings, on Options.Clock
//     (a test steps a fake clock; nothing waits on wall time);
//   - IP reservations (a block of a quantity of addresses, pending or
//     refused with 422 over the project's quota), assignments of their
//     addresses to devices, unassigning and releasing (refused while a
//     block has assignments), tags on reservations;
//   - hardware reservations (AddHardwareReservation) that devices run on,
//     by ID or "next-available";
//   - the catalog: plans, metros, operating systems;
//   - the rate-limit headers on every answer, and 429 once a key has made
//     Options.RateLimit calls in a window;
//   - errors as {"errors": [...]}.
//
// Addresses come from loopback blocks (Options.PrivateBlock, PublicBlock,
// ElasticBlock), so that a simulated machine on this host can use its
// device's addresses as source addresses; IPv6 addresses come from a ULA
// block and are only reported. Each device has two NICs in a bond (mode
// 4) with MAC addresses of their own.
//
// The metadata service (MetadataHandler, on a listener of its own) answers
// GET /metadata and GET /userdata to a device, which it knows by the
// source address of the call, as the real one does.
//
// The ledger (Ledger, and GET /_ledger outside the API) lists every
// device, IP reservation and tag that exists: after a teardown it is
// empty.
//
// Machines are not booted here: Options.Machines, when set, is told when a
// device starts provisioning, changes power and is deprovisioned
// (sim.MetalCloud boots simulated machines for them).
// Faults are seeded and replayable (package sim/fault): equinix.5xx on
// requests, equinix.slowprovision, equinix.nohardware and equinix.failed
// on devices, decided per device hostname. The emulator counts requests
// per method and path template (Requests).
package equinix
