// Package redfish is a Redfish BMC emulator serving many simulated machines
// on one endpoint (one System and one Manager per machine): service root,
// sessions and Basic auth, power (ComputerSystem.Reset, with task monitors
// when power is slow), boot source override with ETags, VirtualMedia insert
// and eject, and inventory (processors, memory, Ethernet interfaces,
// Storage and SimpleStorage). Faults and latency are injectable: Faults
// for every request, and a fault plan (package sim/fault, SetPlan) for
// seeded, replayable faults per BMC. It speaks
// DMTF Redfish so that real clients (redfishtool, sushy) and metalshift's
// own client work against it; it knows nothing about metalshift.
package redfish
