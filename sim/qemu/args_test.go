package qemu

import (
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/metalshift/metalshift/sim/machine"
)

func testSpec(uefi bool, from machine.BootTarget) vmSpec {
	hw := SmallHardware(7, 0x6d, 0)
	hw.Manufacturer = "Acme, Inc." // a comma QEMU must not split on
	return vmSpec{
		ID: "host-7", UUID: "6d657461-6c73-4869-8674-000000000007", Hardware: hw, UEFI: uefi, From: from,
		OVMFCode: "/fw/CODE.fd", VarsFile: "/state/host-7/OVMF_VARS.fd", DiskFiles: []string{"/state/host-7/disk0.raw"},
		BootFile: "http://10.0.2.2:6180/boot/by-mac/52:54:00:6d:00:07", QMPSocket: "/state/host-7/qmp.sock",
		ConsoleLog: "/state/host-7/console.log", Accel: "tcg",
	}
}

// argValues returns the values of every occurrence of flag.
func argValues(a []string, flag string) []string {
	var vals []string
	for i := 0; i+1 < len(a); i++ {
		if a[i] == flag {
			vals = append(vals, a[i+1])
		}
	}
	return vals
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name     string
		uefi     bool
		from     machine.BootTarget
		nic      string // bootindex=... of the NIC, the disk, the CD
		disk, cd string
	}{
		{name: "UEFI network boot", uefi: true, from: machine.BootPxe, nic: "bootindex=1", disk: "bootindex=2", cd: "bootindex=3"},
		{name: "UEFI CD boot", uefi: true, from: machine.BootCd, cd: "bootindex=1", disk: "bootindex=2", nic: "bootindex=3"},
		{name: "BIOS disk boot", from: machine.BootHdd, disk: "bootindex=1", cd: "bootindex=2", nic: "bootindex=3"},
		{name: "BIOS without override boots the disk", from: machine.BootNone, disk: "bootindex=1", cd: "bootindex=2", nic: "bootindex=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := args(testSpec(tt.uefi, tt.from))
			g.Expect(argValues(a, "-machine")).To(Equal([]string{"q35,graphics=off"}))
			g.Expect(argValues(a, "-accel")).To(Equal([]string{"tcg"}))
			g.Expect(argValues(a, "-smp")).To(Equal([]string{"2"}))
			g.Expect(argValues(a, "-m")).To(Equal([]string{"2048"}))
			g.Expect(argValues(a, "-uuid")).To(Equal([]string{"6d657461-6c73-4869-8674-000000000007"}))
			g.Expect(argValues(a, "-smbios")).To(Equal([]string{
				"type=0,vendor=Metalshift Sim,version=1.0.0,date=03/01/2026",
				"type=1,manufacturer=Acme,, Inc.,product=SimVM q35,serial=MSVM000007",
			}))
			g.Expect(a).To(ContainElements("-nodefaults", "-no-reboot", "-S"))
			g.Expect(argValues(a, "-display")).To(Equal([]string{"none"}))
			g.Expect(argValues(a, "-qmp")).To(Equal([]string{"unix:/state/host-7/qmp.sock,server=on,wait=off"}))
			g.Expect(argValues(a, "-chardev")).To(Equal([]string{"file,id=serial0,append=on,path=/state/host-7/console.log"}))
			g.Expect(argValues(a, "-netdev")).To(Equal([]string{"user,id=net0,bootfile=http://10.0.2.2:6180/boot/by-mac/52:54:00:6d:00:07"}))

			pflash := []string{"if=pflash,format=raw,unit=0,readonly=on,file=/fw/CODE.fd", "if=pflash,format=raw,unit=1,file=/state/host-7/OVMF_VARS.fd"}
			drives := argValues(a, "-drive")
			if tt.uefi {
				g.Expect(drives).To(ContainElements(pflash))
			} else {
				g.Expect(drives).NotTo(ContainElement(ContainSubstring("pflash")), "SeaBIOS is QEMU's default")
			}
			g.Expect(drives).To(ContainElement("if=none,id=disk0,format=raw,discard=unmap,file=/state/host-7/disk0.raw"))

			devices := argValues(a, "-device")
			g.Expect(devices).To(HaveLen(3))
			g.Expect(devices[0]).To(Equal("virtio-net-pci,netdev=net0,id=nic0,mac=52:54:00:6d:00:07,speed=1000,duplex=full,addr=0x2," + tt.nic))
			g.Expect(devices[1]).To(Equal("virtio-blk-pci,drive=disk0,id=vd0,serial=VD000007,addr=0x3," + tt.disk))
			g.Expect(devices[2]).To(Equal("ide-cd,id=cd0,bus=ide.0," + tt.cd))
		})
	}
}

func TestArgsWithoutBootFile(t *testing.T) {
	g := NewWithT(t)
	s := testSpec(false, machine.BootPxe)
	s.BootFile = ""
	g.Expect(argValues(args(s), "-netdev")).To(Equal([]string{"user,id=net0"}))
}

// TestArgsGuestForward: a forward is on the first NIC's user network, its
// command quoted for QEMU's shell-like split and its commas escaped.
func TestArgsGuestForward(t *testing.T) {
	g := NewWithT(t)
	s := testSpec(false, machine.BootPxe)
	s.BootFile = ""
	s.GuestForwards = []GuestForward{{Addr: netip.MustParseAddrPort("10.0.2.100:80"),
		Command: []string{"/tmp/go-build 1/sim.test", "forward", "127.64.0.1", "it's,here"}}}
	g.Expect(argValues(args(s), "-netdev")).To(Equal([]string{
		`user,id=net0,guestfwd=tcp:10.0.2.100:80-cmd:'/tmp/go-build 1/sim.test' 'forward' '127.64.0.1' 'it'\''s,,here'`,
	}))
}

func TestBootOrderWithManyDevices(t *testing.T) {
	g := NewWithT(t)
	s := testSpec(false, machine.BootPxe)
	s.Hardware.NICs = append(s.Hardware.NICs, machine.NIC{Name: "enp0s3", MAC: "52:54:01:6d:00:07"})
	s.Hardware.Disks = append(s.Hardware.Disks, &machine.Disk{Name: "/dev/vdb", SerialNumber: "VDB", SizeBytes: 1 << 30})
	s.DiskFiles = append(s.DiskFiles, "/state/host-7/disk1.raw")
	devices := strings.Join(argValues(args(s), "-device"), "\n")
	g.Expect(devices).To(Equal(strings.Join([]string{
		"virtio-net-pci,netdev=net0,id=nic0,mac=52:54:00:6d:00:07,speed=1000,duplex=full,addr=0x2,bootindex=1",
		"virtio-net-pci,netdev=net1,id=nic1,mac=52:54:01:6d:00:07,addr=0x3,bootindex=2",
		"virtio-blk-pci,drive=disk0,id=vd0,serial=VD000007,addr=0x4,bootindex=3",
		"virtio-blk-pci,drive=disk1,id=vd1,serial=VDB,addr=0x5,bootindex=4",
		"ide-cd,id=cd0,bus=ide.0,bootindex=5",
	}, "\n")))
	g.Expect(argValues(args(s), "-netdev")).To(Equal([]string{
		"user,id=net0,bootfile=http://10.0.2.2:6180/boot/by-mac/52:54:00:6d:00:07", "user,id=net1"}),
		"the boot file is offered on the first NIC only")
}

// TestArgsSegment: a NIC on a simulated Ethernet segment is a dgram netdev
// on the segment's UNIX sockets, its paths' commas escaped; the first NIC
// stays on user networking with its boot file.
func TestArgsSegment(t *testing.T) {
	g := NewWithT(t)
	s := testSpec(false, machine.BootPxe)
	s.Hardware.NICs = append(s.Hardware.NICs, machine.NIC{Name: "enp0s3", MAC: "52:54:01:6d:00:07", SpeedGbps: 1})
	s.Segments = map[int]Dgram{1: {Local: "/lan/host-7,1.vm", Remote: "/lan/host-7,1.lan"}}
	a := args(s)
	g.Expect(argValues(a, "-netdev")).To(Equal([]string{
		"user,id=net0,bootfile=http://10.0.2.2:6180/boot/by-mac/52:54:00:6d:00:07",
		"dgram,id=net1,local.type=unix,local.path=/lan/host-7,,1.vm,remote.type=unix,remote.path=/lan/host-7,,1.lan",
	}))
	g.Expect(argValues(a, "-device")).To(ContainElement(
		"virtio-net-pci,netdev=net1,id=nic1,mac=52:54:01:6d:00:07,speed=1000,duplex=full,addr=0x3,bootindex=2"))
}

// TestSegmentOfNoNIC: a segment for the first NIC, or for one the machine
// does not have, stops the VM before QEMU starts.
func TestSegmentOfNoNIC(t *testing.T) {
	for _, i := range []int{0, 1} {
		g := NewWithT(t)
		f := New(Options{StateDir: t.TempDir(), Segments: func(string) map[int]Dgram {
			return map[int]Dgram{i: {Local: "/lan/a.vm", Remote: "/lan/a.lan"}}
		}})
		m := machine.New("vm-0", "6d657461-6c73-4869-8674-0000000000a0", SmallHardware(0xa0, 0x6d, 1<<20))
		v := f.vm(m)
		_, err := v.prepare(false, machine.BootHdd)
		g.Expect(err).To(MatchError(ContainSubstring("the machine's NICs on one are 1 to 0")), "NIC %d", i)
	}
}

func TestURLs(t *testing.T) {
	tests := []struct {
		name, in, guest, host string
	}{
		{name: "loopback boot server", in: "http://127.0.0.1:6180/", guest: "http://10.0.2.2:6180", host: "http://127.0.0.1:6180/"},
		{name: "localhost", in: "http://localhost:6180", guest: "http://10.0.2.2:6180", host: "http://localhost:6180"},
		{name: "IPv6 loopback", in: "http://[::1]:6180", guest: "http://10.0.2.2:6180", host: "http://[::1]:6180"},
		{name: "media URL as the guest sees it", in: "http://10.0.2.2:6180/images/deploy.iso?host=h&signature=s",
			guest: "http://10.0.2.2:6180/images/deploy.iso?host=h&signature=s", host: "http://127.0.0.1:6180/images/deploy.iso?host=h&signature=s"},
		{name: "no port", in: "http://10.0.2.2/x.iso", guest: "http://10.0.2.2/x.iso", host: "http://127.0.0.1/x.iso"},
		{name: "another host stays", in: "http://192.0.2.1:80/x", guest: "http://192.0.2.1:80/x", host: "http://192.0.2.1:80/x"},
		{name: "not a URL stays", in: "::", guest: "::", host: "::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(guestURL(tt.in, DefaultGuestHostAlias)).To(Equal(tt.guest))
			g.Expect(hostURL(tt.in, DefaultGuestHostAlias)).To(Equal(tt.host))
		})
	}
}

func TestCleanConsoleLine(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "colours", in: "\x1b[0;1miPXE 1.0.0\x1b[0m -- Open Source", want: "iPXE 1.0.0 -- Open Source"},
		{name: "screen clear and cursor", in: "\x1b[2J\x1b[01;01H\x1b[=3hBdsDxe: loading Boot0001\r", want: "BdsDxe: loading Boot0001"},
		{name: "reset and private modes", in: "\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2)", want: "SeaBIOS (version 1.16.2)"},
		{name: "redrawn line", in: "Press Ctrl-B...\rnet0: 52:54:00:6d:00:01 (open)\r", want: "net0: 52:54:00:6d:00:01 (open)"},
		{name: "backspaces and blanks", in: "Press Ctrl-B for the iPXE command line...\b\b\b   ", want: "Press Ctrl-B for the iPXE command line..."},
		{name: "blank", in: "\x1b[2J\r", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(cleanConsoleLine(tt.in)).To(Equal(tt.want))
		})
	}
}
