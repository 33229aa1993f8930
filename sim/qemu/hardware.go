package qemu

import (
	"fmt"

	"github.com/metalshift/metalshift/sim/machine"
)

// DefaultDiskSize is the size of SmallHardware's disk when none is given.
const DefaultDiskSize = 8 << 30

// GuestIP is the address QEMU's user networking gives every VM by DHCP.
const GuestIP = "10.0.2.15"

// SmallHardware returns hardware a VM can have under TCG, described as the
// VM's guest sees it: 2 vCPUs of QEMU's "max" model, 2 GiB of memory, one
// sparse virtio disk of diskSize bytes (DefaultDiskSize when 0), one
// virtio NIC on user networking. i makes the serial numbers and the MAC
// unique; macOctet is the MAC's fourth octet, as in sim.NewMachine.
func SmallHardware(i int, macOctet byte, diskSize int64) machine.Hardware {
	if diskSize == 0 {
		diskSize = DefaultDiskSize
	}
	hi, lo := byte(i>>8&0xff), byte(i&0xff)
	return machine.Hardware{
		Manufacturer: "Metalshift Sim", Model: "SimVM q35", SerialNumber: fmt.Sprintf("MSVM%06d", i),
		// SMBIOS writes dates as mm/dd/yyyy.
		BIOSVersion: "1.0.0", BIOSVendor: "Metalshift Sim", BIOSDate: "03/01/2026",
		CPUArch: "x86_64", CPUModel: "QEMU TCG CPU version 2.5+", CPUCount: 2, RAMMiB: 2048,
		NICs: []machine.NIC{
			{Name: "enp0s2", MAC: fmt.Sprintf("52:54:00:%02x:%02x:%02x", macOctet, hi, lo), IP: GuestIP, SpeedGbps: 1},
		},
		Disks: []*machine.Disk{
			// What Linux says of a virtio disk: PCI vendor 0x1af4, no model,
			// no WWN, rotational.
			{Name: "/dev/vda", Vendor: "0x1af4", SerialNumber: fmt.Sprintf("VD%06d", i), SizeBytes: diskSize, Rotational: true, Type: "HDD"},
		},
	}
}
