package redfish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Link is a Redfish @odata.id reference.
type Link struct {
	ID string `json:"@odata.id"`
}

type collection struct {
	Members []Link
}

// Boot is the boot source override of a system.
type Boot struct {
	BootSourceOverrideTarget  string `json:",omitempty"`
	BootSourceOverrideEnabled string `json:",omitempty"`
	BootSourceOverrideMode    string `json:",omitempty"`
}

// System is the part of a ComputerSystem the engine reads.
type System struct {
	ODataID          string `json:"@odata.id"`
	ID               string `json:"Id"`
	UUID             string
	Manufacturer     string
	Model            string
	SerialNumber     string
	BiosVersion      string
	PowerState       string
	Boot             Boot
	ProcessorSummary struct {
		Count int
		Model string
	}
	MemorySummary struct {
		TotalSystemMemoryGiB float64
	}
	EthernetInterfaces Link
	Storage            Link
	SimpleStorage      Link
	Processors         Link
	Links              struct {
		ManagedBy []Link
	}
	Oem struct {
		Metalshift struct {
			ProcessorArchitecture string
			ProcessorMaxSpeedMHz  float64
			BiosVendor            string
			BiosReleaseDate       string
		}
	}
}

// Reset types.
const (
	ResetOn               = "On"
	ResetForceOff         = "ForceOff"
	ResetGracefulShutdown = "GracefulShutdown"
	ResetForceRestart     = "ForceRestart"
	ResetGracefulRestart  = "GracefulRestart"
)

// SystemPaths lists the systems of the service.
func (c *Client) SystemPaths(ctx context.Context) ([]string, error) {
	var col collection
	if _, err := c.Get(ctx, "/redfish/v1/Systems", &col); err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(col.Members))
	for _, m := range col.Members {
		paths = append(paths, m.ID)
	}
	return paths, nil
}

// System reads the system at path and its ETag.
func (c *Client) System(ctx context.Context, path string) (*System, string, error) {
	s := &System{}
	etag, err := c.Get(ctx, path, s)
	if err != nil {
		return nil, "", err
	}
	return s, etag, nil
}

// Reset runs ComputerSystem.Reset with resetType and returns its task
// monitor, if the BMC runs it in the background.
func (c *Client) Reset(ctx context.Context, systemPath, resetType string) (monitor string, err error) {
	return c.Post(ctx, strings.TrimSuffix(systemPath, "/")+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": resetType})
}

// SetBoot sets the boot source override, guarded by the system's ETag when
// the BMC offers one; on a concurrent change it re-reads and retries once.
// It returns the task monitor of a BMC that applies it in the background.
func (c *Client) SetBoot(ctx context.Context, systemPath string, boot Boot) (monitor string, err error) {
	for attempt := 0; ; attempt++ {
		_, etag, err := c.System(ctx, systemPath)
		if err != nil {
			return "", err
		}
		monitor, err = c.Patch(ctx, systemPath, map[string]any{"Boot": boot}, etag)
		if errors.Is(err, ErrPreconditionFailed) && attempt == 0 {
			continue
		}
		return monitor, err
	}
}

// VirtualMedia is a virtual drive of a manager.
type VirtualMedia struct {
	ODataID    string `json:"@odata.id"`
	ID         string `json:"Id"`
	MediaTypes []string
	Image      string
	Inserted   bool
}

// CDPath finds the virtual CD/DVD drive of the manager of the system.
func (c *Client) CDPath(ctx context.Context, sys *System) (string, error) {
	for _, mgr := range sys.Links.ManagedBy {
		var m struct{ VirtualMedia Link }
		if _, err := c.Get(ctx, mgr.ID, &m); err != nil {
			return "", err
		}
		if m.VirtualMedia.ID == "" {
			continue
		}
		var col collection
		if _, err := c.Get(ctx, m.VirtualMedia.ID, &col); err != nil {
			return "", err
		}
		for _, member := range col.Members {
			var vm VirtualMedia
			if _, err := c.Get(ctx, member.ID, &vm); err != nil {
				return "", err
			}
			if slices.Contains(vm.MediaTypes, "CD") || slices.Contains(vm.MediaTypes, "DVD") {
				return member.ID, nil
			}
		}
	}
	return "", fmt.Errorf("system %s has no virtual CD drive: %w", sys.ODataID, ErrNotFound)
}

// InsertMedia puts image in the drive at mediaPath. A drive holding
// another image is ejected first: then the eject's task monitor (or "") is
// returned and InsertMedia must be called again once it is done. A drive
// holding image already is left alone.
func (c *Client) InsertMedia(ctx context.Context, mediaPath, image string) (monitor string, err error) {
	var vm VirtualMedia
	if _, err := c.Get(ctx, mediaPath, &vm); err != nil {
		return "", err
	}
	if vm.Inserted && vm.Image == image {
		return "", nil
	}
	if vm.Inserted {
		if monitor, err := c.EjectMedia(ctx, mediaPath); err != nil || monitor != "" {
			return monitor, err
		}
	}
	return c.Post(ctx, mediaPath+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": image, "Inserted": true, "WriteProtected": true})
}

// EjectMedia empties the drive at mediaPath; no-op when it is empty.
func (c *Client) EjectMedia(ctx context.Context, mediaPath string) (monitor string, err error) {
	var vm VirtualMedia
	if _, err := c.Get(ctx, mediaPath, &vm); err != nil {
		return "", err
	}
	if !vm.Inserted {
		return "", nil
	}
	return c.Post(ctx, mediaPath+"/Actions/VirtualMedia.EjectMedia", map[string]any{})
}
