package redfish

import (
	"context"
	"math"
	"strings"

	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	rf "github.com/metalshift/metalshift/hostengine/pkg/redfish"
)

// Inspect reads the inventory out of band.
func (d *Driver) Inspect(ctx context.Context) (*metal3v1.HardwareDetails, error) {
	p, err := d.system(ctx)
	if err != nil {
		return nil, err
	}
	inv, err := d.client.Inventory(ctx, p)
	if err != nil {
		return nil, translate(err)
	}
	return hardwareDetails(inv), nil
}

// hardwareDetails converts a Redfish inventory to the metal3 shape.
func hardwareDetails(inv *rf.Inventory) *metal3v1.HardwareDetails {
	s := inv.System
	hw := &metal3v1.HardwareDetails{
		SystemVendor: metal3v1.HardwareSystemVendor{Manufacturer: s.Manufacturer, ProductName: s.Model, SerialNumber: s.SerialNumber},
		Firmware: metal3v1.Firmware{BIOS: metal3v1.BIOS{
			Version: s.BiosVersion, Vendor: s.Oem.Metalshift.BiosVendor, Date: s.Oem.Metalshift.BiosReleaseDate,
		}},
		RAMMebibytes: int(math.Round(s.MemorySummary.TotalSystemMemoryGiB * 1024)),
		CPU:          metal3v1.CPU{Count: s.ProcessorSummary.Count, Model: s.ProcessorSummary.Model, Arch: s.Oem.Metalshift.ProcessorArchitecture},
		Hostname:     s.ID,
	}
	if len(inv.Processors) > 0 {
		pr := inv.Processors[0]
		hw.CPU.ClockMegahertz = metal3v1.ClockSpeed(pr.MaxSpeedMHz)
		if hw.CPU.Arch == "" {
			hw.CPU.Arch = archFromInstructionSet(pr.InstructionSet)
		}
		if hw.CPU.Model == "" {
			hw.CPU.Model = pr.Model
		}
	}
	for _, n := range inv.NICs {
		nic := metal3v1.NIC{Name: n.ID, MAC: strings.ToLower(n.MACAddress), SpeedGbps: n.SpeedMbps / 1000}
		if len(n.IPv4Addresses) > 0 {
			nic.IP = n.IPv4Addresses[0].Address
		}
		hw.NIC = append(hw.NIC, nic)
	}
	for _, dr := range inv.Drives {
		st := metal3v1.Storage{
			Name: dr.Name, SizeBytes: metal3v1.Capacity(dr.CapacityBytes), Model: dr.Model, Vendor: dr.Manufacturer,
			SerialNumber: dr.SerialNumber, Rotational: dr.MediaType == "HDD", Type: metal3v1.DiskType(dr.MediaType),
		}
		if dr.Protocol == "NVMe" {
			st.Type = "NVME"
		}
		for _, id := range dr.Identifiers {
			if id.DurableNameFormat == "NAA" || id.DurableNameFormat == "EUI" {
				st.WWN = id.DurableName
			}
		}
		hw.Storage = append(hw.Storage, st)
	}
	return hw
}

func archFromInstructionSet(isa string) string {
	switch isa {
	case "x86-64":
		return "x86_64"
	case "ARM-A64":
		return "aarch64"
	}
	return ""
}
