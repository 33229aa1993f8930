package host

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
)

// Inventory is what the agent reports of the machine (the deploy API's type).
type Inventory = deployapi.Inventory

// SystemVendor is the machine's DMI identity.
type SystemVendor = deployapi.SystemVendor

// CPU describes the processors.
type CPU = deployapi.CPU

// NIC is a physical network interface.
type NIC = deployapi.NIC

// Boot modes, as BareMetalHost's spec.bootMode spells them.
const (
	BootModeUEFI   = deployapi.BootModeUEFI
	BootModeLegacy = deployapi.BootModeLegacy
)

// ReadInventory reads the inventory of the machine under p.
func ReadInventory(p Paths) (*Inventory, error) {
	inv := &Inventory{
		SystemVendor: SystemVendor{
			Manufacturer: readString(filepath.Join(p.Sys, "class", "dmi", "id", "sys_vendor")),
			ProductName:  readString(filepath.Join(p.Sys, "class", "dmi", "id", "product_name")),
			SerialNumber: readString(filepath.Join(p.Sys, "class", "dmi", "id", "product_serial")),
		},
		BootMode: BootModeLegacy,
	}
	// The kernel exposes the EFI runtime only when it was booted by UEFI.
	if st, err := os.Stat(filepath.Join(p.Sys, "firmware", "efi")); err == nil && st.IsDir() {
		inv.BootMode = BootModeUEFI
	}
	var err error
	if inv.CPU, err = readCPU(p); err != nil {
		return nil, err
	}
	if inv.MemoryBytes, err = readMemory(p); err != nil {
		return nil, err
	}
	if inv.NICs, err = readNICs(p); err != nil {
		return nil, err
	}
	disks, err := Disks(p)
	if err != nil {
		return nil, err
	}
	for _, d := range disks {
		inv.Disks = append(inv.Disks, d.Info())
	}
	return inv, nil
}

// architectures maps Go's names to the kernel's (uname -m).
var architectures = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}

func readCPU(p Paths) (CPU, error) {
	cpu := CPU{Architecture: runtime.GOARCH}
	if a, ok := architectures[runtime.GOARCH]; ok {
		cpu.Architecture = a
	}
	f, err := os.Open(filepath.Join(p.Proc, "cpuinfo"))
	if err != nil {
		return cpu, fmt.Errorf("reading the CPUs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "processor":
			cpu.Count++
		case "model name":
			if cpu.Model == "" {
				cpu.Model = strings.TrimSpace(val)
			}
		}
	}
	return cpu, sc.Err()
}

func readMemory(p Paths) (int64, error) {
	// The installed memory, as the memory blocks the kernel manages (what
	// a person sized the machine with), not MemTotal, which lacks what the
	// firmware and the kernel reserved.
	if b, err := os.ReadFile(filepath.Join(p.Sys, "devices", "system", "memory", "block_size_bytes")); err == nil {
		size, err := strconv.ParseInt(strings.TrimSpace(string(b)), 16, 64)
		blocks, _ := filepath.Glob(filepath.Join(p.Sys, "devices", "system", "memory", "memory[0-9]*"))
		var online int64
		for _, blk := range blocks {
			if st, _ := os.ReadFile(filepath.Join(blk, "state")); strings.TrimSpace(string(st)) == "online" {
				online++
			}
		}
		if err == nil && size > 0 && online > 0 {
			return online * size, nil
		}
	}
	return memTotal(p)
}

func memTotal(p Paths) (int64, error) {
	f, err := os.Open(filepath.Join(p.Proc, "meminfo"))
	if err != nil {
		return 0, fmt.Errorf("reading the memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// MemTotal:       16314608 kB
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("meminfo: unexpected MemTotal line %q", sc.Text())
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("meminfo has no MemTotal")
}

// readNICs lists the interfaces backed by a device (not lo, bridges,
// bonds, veth or tunnels), by name.
func readNICs(p Paths) ([]NIC, error) {
	dir := filepath.Join(p.Sys, "class", "net")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	var out []NIC
	for _, e := range entries {
		name := e.Name()
		if _, err := os.Stat(filepath.Join(dir, name, "device")); err != nil {
			continue
		}
		nic := NIC{Name: name, MAC: strings.ToLower(readString(filepath.Join(dir, name, "address"))),
			HasLink: readString(filepath.Join(dir, name, "carrier")) == "1"}
		// speed is -1 or unreadable without a link.
		if v, err := strconv.Atoi(readString(filepath.Join(dir, name, "speed"))); err == nil && v > 0 {
			nic.SpeedMbps = v
		}
		out = append(out, nic)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
