package qemu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/metalshift/metalshift/sim/machine"
)

// vmSpec is everything a VM's command line is made from.
type vmSpec struct {
	ID, UUID string
	Hardware machine.Hardware
	// UEFI boots OVMF (OVMFCode with the VM's own VarsFile), else SeaBIOS.
	UEFI               bool
	OVMFCode, VarsFile string
	// From is the device booted first; the others follow (disks, CD, NIC).
	From machine.BootTarget
	// DiskFiles back Hardware.Disks, in order.
	DiskFiles []string
	// BootFile is the DHCP boot file URL; "" offers none.
	BootFile string
	// GuestForwards are on the first NIC's user network.
	GuestForwards []GuestForward
	// Segments are the sockets of the NICs on a simulated Ethernet
	// segment, by index; the others are on user networking.
	Segments map[int]Dgram
	// QMPSocket and ConsoleLog are paths in the VM's state directory.
	QMPSocket, ConsoleLog string
	Accel                 string
}

// The CD drive's device ID, and the first PCI slot of the NICs (a Linux
// guest names the first enp0s2), which the disks follow (vda, vdb, ...).
const (
	cdDevice  = "cd0"
	firstSlot = 2
)

// args returns QEMU's arguments for a VM that starts paused (-S): the
// caller connects QMP, attaches media, then continues it. A guest reset
// ends QEMU (-no-reboot) so that the next boot goes through the machine's
// boot override, as a BMC's one-time override does.
func args(s vmSpec) []string {
	hw := s.Hardware
	a := []string{
		"-name", opt(s.ID),
		"-machine", "q35,graphics=off",
		"-accel", s.Accel,
		"-cpu", "max",
		"-smp", strconv.Itoa(hw.CPUCount),
		"-m", strconv.Itoa(hw.RAMMiB),
		"-uuid", s.UUID,
		"-smbios", "type=0,vendor=" + opt(hw.BIOSVendor) + ",version=" + opt(hw.BIOSVersion) + ",date=" + opt(hw.BIOSDate),
		"-smbios", "type=1,manufacturer=" + opt(hw.Manufacturer) + ",product=" + opt(hw.Model) + ",serial=" + opt(hw.SerialNumber),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-S",
		"-qmp", "unix:" + opt(s.QMPSocket) + ",server=on,wait=off",
		"-chardev", "file,id=serial0,append=on,path=" + opt(s.ConsoleLog),
		"-serial", "chardev:serial0",
	}
	if s.UEFI {
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+opt(s.OVMFCode),
			"-drive", "if=pflash,format=raw,unit=1,file="+opt(s.VarsFile))
	}
	order := bootOrder(s.From, len(hw.Disks), len(hw.NICs))
	for i, n := range hw.NICs {
		netdev := fmt.Sprintf("user,id=net%d", i)
		if i == 0 && s.BootFile != "" {
			netdev += ",bootfile=" + opt(s.BootFile)
		}
		for _, f := range s.GuestForwards {
			if i == 0 {
				netdev += ",guestfwd=tcp:" + f.Addr.String() + "-cmd:" + opt(shellJoin(f.Command))
			}
		}
		if d, ok := s.Segments[i]; ok {
			netdev = fmt.Sprintf("dgram,id=net%d,local.type=unix,local.path=%s,remote.type=unix,remote.path=%s", i, opt(d.Local), opt(d.Remote))
		}
		nic := fmt.Sprintf("virtio-net-pci,netdev=net%d,id=nic%d,mac=%s", i, i, n.MAC)
		if n.SpeedGbps > 0 {
			nic += fmt.Sprintf(",speed=%d,duplex=full", n.SpeedGbps*1000)
		}
		a = append(a, "-netdev", netdev, "-device", nic+fmt.Sprintf(",addr=%#x,bootindex=%d", firstSlot+i, order.nics+i))
	}
	for i, d := range hw.Disks {
		a = append(a,
			"-drive", fmt.Sprintf("if=none,id=disk%d,format=raw,discard=unmap,file=%s", i, opt(s.DiskFiles[i])),
			"-device", fmt.Sprintf("virtio-blk-pci,drive=disk%d,id=vd%d,serial=%s,addr=%#x,bootindex=%d",
				i, i, opt(d.SerialNumber), firstSlot+len(hw.NICs)+i, order.disks+i))
	}
	return append(a, "-device", fmt.Sprintf("ide-cd,id=%s,bus=ide.0,bootindex=%d", cdDevice, order.cd))
}

// bootIndexes are the first bootindex of each kind of device.
type bootIndexes struct{ nics, disks, cd int }

// bootOrder puts the devices to boot from first, then the disks, the CD
// and the NICs, as a server's default boot order after its override.
func bootOrder(from machine.BootTarget, disks, nics int) bootIndexes {
	switch from {
	case machine.BootPxe:
		return bootIndexes{nics: 1, disks: 1 + nics, cd: 1 + nics + disks}
	case machine.BootCd:
		return bootIndexes{cd: 1, disks: 2, nics: 2 + disks}
	default:
		return bootIndexes{disks: 1, cd: 1 + disks, nics: 2 + disks}
	}
}

// opt escapes a value for QEMU's comma-separated options.
func opt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// shellJoin quotes args for QEMU's guestfwd cmd:, which splits it as a
// shell would (without running one).
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
