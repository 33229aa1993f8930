package redfish

import (
	"context"
)

// EthernetInterface is a NIC of a system.
type EthernetInterface struct {
	ID            string `json:"Id"`
	Name          string
	MACAddress    string
	SpeedMbps     int
	IPv4Addresses []struct{ Address string }
}

// Drive is a disk of a system.
type Drive struct {
	ID            string `json:"Id"`
	Name          string
	CapacityBytes int64
	Model         string
	Manufacturer  string
	SerialNumber  string
	MediaType     string
	Protocol      string
	Identifiers   []struct {
		DurableNameFormat string
		DurableName       string
	}
}

// Processor is one processor of a system.
type Processor struct {
	ProcessorArchitecture string
	InstructionSet        string
	Model                 string
	MaxSpeedMHz           float64
	TotalThreads          int
}

// Inventory is what out-of-band inspection reads.
type Inventory struct {
	System     *System
	NICs       []EthernetInterface
	Drives     []Drive
	Processors []Processor
}

// Inventory reads a system's NICs, drives and processors. Collections the
// BMC does not offer are left empty.
func (c *Client) Inventory(ctx context.Context, systemPath string) (*Inventory, error) {
	sys, _, err := c.System(ctx, systemPath)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{System: sys}
	if inv.NICs, err = members[EthernetInterface](ctx, c, sys.EthernetInterfaces.ID); err != nil {
		return nil, err
	}
	if inv.Processors, err = members[Processor](ctx, c, sys.Processors.ID); err != nil {
		return nil, err
	}
	if sys.Storage.ID != "" {
		var storages collection
		if _, err := c.Get(ctx, sys.Storage.ID, &storages); err != nil {
			return nil, err
		}
		for _, st := range storages.Members {
			var s struct{ Drives []Link }
			if _, err := c.Get(ctx, st.ID, &s); err != nil {
				return nil, err
			}
			for _, d := range s.Drives {
				var drive Drive
				if _, err := c.Get(ctx, d.ID, &drive); err != nil {
					return nil, err
				}
				inv.Drives = append(inv.Drives, drive)
			}
		}
	}
	return inv, nil
}

// members reads every member of the collection at path; "" yields none.
func members[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	if path == "" {
		return nil, nil
	}
	var col collection
	if _, err := c.Get(ctx, path, &col); err != nil {
		return nil, err
	}
	out := make([]T, 0, len(col.Members))
	for _, m := range col.Members {
		var v T
		if _, err := c.Get(ctx, m.ID, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
