// Package qemu is a backend of the simulator in which each machine is a
// real QEMU VM: a machine.Firmware that, when the machine powers on, starts
// qemu-system-x86_64 (TCG, q35) built from the machine's Hardware — CPUs,
// memory, SMBIOS identity and UUID, a sparse raw file per disk, a virtio
// NIC with the machine's MAC on QEMU's user networking — with OVMF or
// SeaBIOS as the BMC's boot mode says, booting the device the BMC's
// override names first. Power off and reset end QEMU (QMP quit); a guest
// that powers off or reboots powers the machine off or resets it. The
// machine's virtual media is downloaded by the BMC side (this package, on
// the host) and attached to the VM's CD drive through QMP, also while it
// runs. Network boot is QEMU's DHCP offering the boot server's
// /boot/by-mac/<mac> URL as boot file, which QEMU's iPXE ROMs fetch over
// HTTP.
//
// The Redfish and IPMI emulators drive these machines unchanged. VMs reach
// only what the host's loopback serves, at 10.0.2.2, and the programs
// Options.GuestForwards starts for their connections to other addresses
// of their network (a metal cloud's metadata service, sim.MetalCloud). A
// machine's NICs other than the first may instead join a simulated
// Ethernet segment (Options.Segments, sim/lan) through QEMU's -netdev
// dgram on UNIX datagram sockets. This package speaks
// to QEMU (command line, QMP) and HTTP only; it imports no controller
// package.
package qemu
