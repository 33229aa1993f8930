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
// BMC does not offer are left empty. It reads at most MaxMembers resources
// through the system's links.
func (c *Client) Inventory(ctx context.Context, systemPath string) (*Inventory, error) {
	sys, _, err := c.System(ctx, systemPath)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{System: sys}
	b := newBudget("inventory of " + shorten(systemPath))
	if inv.NICs, err = members[EthernetInterface](ctx, c, b, sys.EthernetInterfaces.ID); err != nil {
		return nil, err
	}
	if inv.Processors, err = members[Processor](ctx, c, b, sys.Processors.ID); err != nil {
		return nil, err
	}
	storages, err := members[struct{ Drives []Link }](ctx, c, b, sys.Storage.ID)
	if err != nil {
		return nil, err
	}
	for _, st := range storages {
		if err := b.spend(len(st.Drives)); err != nil {
			return nil, err
		}
		for _, d := range st.Drives {
			var drive Drive
			if _, err := c.Get(ctx, d.ID, &drive); err != nil {
				return nil, err
			}
			inv.Drives = append(inv.Drives, drive)
		}
	}
	return inv, nil
}

// members reads every member of the collection at path, spending them
// from b; "" yields none.
func members[T any](ctx context.Context, c *Client, b *budget, path string) ([]T, error) {
	if path == "" {
		return nil, nil
	}
	links, err := c.links(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(links)); err != nil {
		return nil, err
	}
	out := make([]T, 0, len(links))
	for _, m := range links {
		var v T
		if _, err := c.Get(ctx, m.ID, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
