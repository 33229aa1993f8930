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

// collection is one page of a Redfish collection.
type collection struct {
	Members  []Link
	NextLink string `json:"Members@odata.nextLink"`
}

// links reads the member links of the collection at path, page after
// page, and refuses a collection of more than MaxMembers members. Every
// page but the last adds members, so the pages are bounded too.
func (c *Client) links(ctx context.Context, path string) ([]Link, error) {
	var out []Link
	for next := path; next != ""; {
		var page collection
		if _, err := c.Get(ctx, next, &page); err != nil {
			return nil, err
		}
		if len(out)+len(page.Members) > MaxMembers {
			return nil, fmt.Errorf("collection %s has more than %d members: %w", shorten(path), MaxMembers, ErrTooLarge)
		}
		if page.NextLink != "" && len(page.Members) == 0 {
			return nil, fmt.Errorf("collection %s: a page without members links to another page", shorten(path))
		}
		out = append(out, page.Members...)
		next = page.NextLink
	}
	return out, nil
}

// budget counts the resources one call reads through the BMC's links, so
// that links within links (storages, their drives; managers, their
// media) cannot make it read without end.
type budget struct {
	left int
	what string
}

func newBudget(what string) *budget { return &budget{left: MaxMembers, what: what} }

// spend takes n resources from the budget, or says it is exhausted.
func (b *budget) spend(n int) error {
	if n > b.left {
		return fmt.Errorf("%s: the BMC links more than %d resources: %w", b.what, MaxMembers, ErrTooLarge)
	}
	b.left -= n
	return nil
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
	members, err := c.links(ctx, "/redfish/v1/Systems")
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(members))
	for _, m := range members {
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
	b := newBudget("finding the virtual CD of " + shorten(sys.ODataID))
	if err := b.spend(len(sys.Links.ManagedBy)); err != nil {
		return "", err
	}
	for _, mgr := range sys.Links.ManagedBy {
		var m struct{ VirtualMedia Link }
		if _, err := c.Get(ctx, mgr.ID, &m); err != nil {
			return "", err
		}
		if m.VirtualMedia.ID == "" {
			continue
		}
		media, err := c.links(ctx, m.VirtualMedia.ID)
		if err != nil {
			return "", err
		}
		if err := b.spend(len(media)); err != nil {
			return "", err
		}
		for _, member := range media {
			var vm VirtualMedia
			if _, err := c.Get(ctx, member.ID, &vm); err != nil {
				return "", err
			}
			if slices.Contains(vm.MediaTypes, "CD") || slices.Contains(vm.MediaTypes, "DVD") {
				return member.ID, nil
			}
		}
	}
	return "", fmt.Errorf("system %s has no virtual CD drive: %w", shorten(sys.ODataID), ErrNotFound)
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
