package metalclient

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// ListProjects lists the key's projects, every page.
func (c *Client) ListProjects(ctx context.Context) ([]equinixapi.Project, error) {
	var all []equinixapi.Project
	err := c.pages(ctx, nil, func(query string) (equinixapi.Meta, error) {
		var l equinixapi.ProjectList
		err := c.do(ctx, http.MethodGet, "/projects?"+query, nil, &l)
		all = append(all, l.Projects...)
		return l.Meta, err
	})
	return all, err
}

// CreateProject creates a project.
func (c *Client) CreateProject(ctx context.Context, name string) (*equinixapi.Project, error) {
	var p equinixapi.Project
	if err := c.do(ctx, http.MethodPost, "/projects", equinixapi.ProjectCreateInput{Name: name}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetProject reads a project.
func (c *Client) GetProject(ctx context.Context, id string) (*equinixapi.Project, error) {
	var p equinixapi.Project
	if err := c.do(ctx, http.MethodGet, "/projects/"+esc(id), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteProject deletes an empty project.
func (c *Client) DeleteProject(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/projects/"+esc(id), nil, nil)
}

// CreateDevice creates a device in a project.
func (c *Client) CreateDevice(ctx context.Context, projectID string, in equinixapi.DeviceCreateInput) (*equinixapi.Device, error) {
	var d equinixapi.Device
	if err := c.do(ctx, http.MethodPost, "/projects/"+esc(projectID)+"/devices", in, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// GetDevice reads a device.
func (c *Client) GetDevice(ctx context.Context, id string) (*equinixapi.Device, error) {
	var d equinixapi.Device
	if err := c.do(ctx, http.MethodGet, "/devices/"+esc(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeviceFilter narrows ListDevices.
type DeviceFilter struct {
	// Tag lists the devices with this tag only.
	Tag string
	// Hostname lists the devices with this hostname only.
	Hostname string
}

// ListDevices lists a project's devices, reading every page.
func (c *Client) ListDevices(ctx context.Context, projectID string, f DeviceFilter) ([]equinixapi.Device, error) {
	q := url.Values{}
	if f.Tag != "" {
		q.Set("tag", f.Tag)
	}
	if f.Hostname != "" {
		q.Set("hostname", f.Hostname)
	}
	var all []equinixapi.Device
	path := "/projects/" + esc(projectID) + "/devices"
	err := c.pages(ctx, q, func(query string) (equinixapi.Meta, error) {
		var l equinixapi.DeviceList
		err := c.do(ctx, http.MethodGet, path+"?"+query, nil, &l)
		all = append(all, l.Devices...)
		return l.Meta, err
	})
	return all, err
}

// pages calls read for page 1, 2, … until the meta block says it was the
// last page (or a page comes back empty).
func (c *Client) pages(ctx context.Context, q url.Values, read func(query string) (equinixapi.Meta, error)) error {
	if q == nil {
		q = url.Values{}
	}
	for page := 1; page <= maxPages; page++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.Set("page", strconv.Itoa(page))
		q.Set("per_page", strconv.Itoa(c.perPage))
		meta, err := read(q.Encode())
		if err != nil {
			return err
		}
		if page >= meta.LastPage || meta.Total == 0 {
			return nil
		}
	}
	return nil
}

// UpdateDevice changes a device.
func (c *Client) UpdateDevice(ctx context.Context, id string, in equinixapi.DeviceUpdateInput) (*equinixapi.Device, error) {
	var d equinixapi.Device
	if err := c.do(ctx, http.MethodPut, "/devices/"+esc(id), in, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeleteDevice deletes a device (force: force_delete=true). The device
// deprovisions, then is gone (IsNotFound).
func (c *Client) DeleteDevice(ctx context.Context, id string, force bool) error {
	path := "/devices/" + esc(id)
	if force {
		path += "?force_delete=true"
	}
	return c.do(ctx, http.MethodDelete, path, nil, nil)
}

// DeviceAction asks for a power action or a reinstall (202).
func (c *Client) DeviceAction(ctx context.Context, id string, in equinixapi.DeviceActionInput) error {
	return c.do(ctx, http.MethodPost, "/devices/"+esc(id)+"/actions", in, nil)
}

// PowerOn powers a device on.
func (c *Client) PowerOn(ctx context.Context, id string) error {
	return c.DeviceAction(ctx, id, equinixapi.DeviceActionInput{Type: equinixapi.ActionPowerOn})
}

// PowerOff powers a device off.
func (c *Client) PowerOff(ctx context.Context, id string) error {
	return c.DeviceAction(ctx, id, equinixapi.DeviceActionInput{Type: equinixapi.ActionPowerOff})
}

// Reboot reboots a device.
func (c *Client) Reboot(ctx context.Context, id string) error {
	return c.DeviceAction(ctx, id, equinixapi.DeviceActionInput{Type: equinixapi.ActionReboot})
}

// RequestIPReservation asks for a block of addresses. Over the project's
// quota the block is pending, or the request IsUnprocessable with
// FailOnApprovalRequired.
func (c *Client) RequestIPReservation(ctx context.Context, projectID string, in equinixapi.IPReservationRequest) (*equinixapi.IPReservation, error) {
	var r equinixapi.IPReservation
	if err := c.do(ctx, http.MethodPost, "/projects/"+esc(projectID)+"/ips", in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// IPFilter narrows ListIPReservations.
type IPFilter struct {
	// Types lists reservations of these types only.
	Types []string
	// Tag lists reservations with this tag only (filtered here: the API
	// has no tag filter for addresses).
	Tag string
}

// ListIPReservations lists a project's reservations, reading every page.
func (c *Client) ListIPReservations(ctx context.Context, projectID string, f IPFilter) ([]equinixapi.IPReservation, error) {
	q := url.Values{}
	if len(f.Types) > 0 {
		q.Set("types", strings.Join(f.Types, ","))
	}
	var all []equinixapi.IPReservation
	path := "/projects/" + esc(projectID) + "/ips"
	err := c.pages(ctx, q, func(query string) (equinixapi.Meta, error) {
		var l equinixapi.IPReservationList
		err := c.do(ctx, http.MethodGet, path+"?"+query, nil, &l)
		for _, r := range l.IPAddresses {
			if f.Tag == "" || slices.Contains(r.Tags, f.Tag) {
				all = append(all, r)
			}
		}
		return l.Meta, err
	})
	return all, err
}

// GetIPReservation reads a reservation.
func (c *Client) GetIPReservation(ctx context.Context, id string) (*equinixapi.IPReservation, error) {
	var r equinixapi.IPReservation
	if err := c.do(ctx, http.MethodGet, "/ips/"+esc(id), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetIPAssignment reads an assignment.
func (c *Client) GetIPAssignment(ctx context.Context, id string) (*equinixapi.IPAssignment, error) {
	var a equinixapi.IPAssignment
	if err := c.do(ctx, http.MethodGet, "/ips/"+esc(id), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UpdateIPReservation changes a reservation's tags, details or customdata.
func (c *Client) UpdateIPReservation(ctx context.Context, id string, in equinixapi.IPReservationUpdateInput) (*equinixapi.IPReservation, error) {
	var r equinixapi.IPReservation
	if err := c.do(ctx, http.MethodPatch, "/ips/"+esc(id), in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ReleaseIPReservation gives a block back; it IsUnprocessable while any
// of its addresses is assigned.
func (c *Client) ReleaseIPReservation(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/ips/"+esc(id), nil, nil)
}

// Unassign takes an assigned address off its device.
func (c *Client) Unassign(ctx context.Context, assignmentID string) error {
	return c.do(ctx, http.MethodDelete, "/ips/"+esc(assignmentID), nil, nil)
}

// AssignIP assigns an address of one of the project's reservations to a
// device.
func (c *Client) AssignIP(ctx context.Context, deviceID, address string) (*equinixapi.IPAssignment, error) {
	var a equinixapi.IPAssignment
	if err := c.do(ctx, http.MethodPost, "/devices/"+esc(deviceID)+"/ips", equinixapi.IPAssignmentInput{Address: address}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ListDeviceIPs lists a device's addresses.
func (c *Client) ListDeviceIPs(ctx context.Context, deviceID string) ([]equinixapi.IPAssignment, error) {
	var l equinixapi.IPAssignmentList
	if err := c.do(ctx, http.MethodGet, "/devices/"+esc(deviceID)+"/ips", nil, &l); err != nil {
		return nil, err
	}
	return l.IPAddresses, nil
}

// ListPlans lists the plans.
func (c *Client) ListPlans(ctx context.Context) ([]equinixapi.Plan, error) {
	var l equinixapi.PlanList
	err := c.do(ctx, http.MethodGet, "/plans", nil, &l)
	return l.Plans, err
}

// ListMetros lists the metros.
func (c *Client) ListMetros(ctx context.Context) ([]equinixapi.Metro, error) {
	var l equinixapi.MetroList
	err := c.do(ctx, http.MethodGet, "/locations/metros", nil, &l)
	return l.Metros, err
}

// ListOperatingSystems lists the operating systems.
func (c *Client) ListOperatingSystems(ctx context.Context) ([]equinixapi.OperatingSystem, error) {
	var l equinixapi.OperatingSystemList
	err := c.do(ctx, http.MethodGet, "/operating-systems", nil, &l)
	return l.OperatingSystems, err
}

// ListHardwareReservations lists a project's hardware reservations,
// reading every page.
func (c *Client) ListHardwareReservations(ctx context.Context, projectID string) ([]equinixapi.HardwareReservation, error) {
	var all []equinixapi.HardwareReservation
	path := "/projects/" + esc(projectID) + "/hardware-reservations"
	err := c.pages(ctx, nil, func(query string) (equinixapi.Meta, error) {
		var l equinixapi.HardwareReservationList
		err := c.do(ctx, http.MethodGet, path+"?"+query, nil, &l)
		all = append(all, l.HardwareReservations...)
		return l.Meta, err
	})
	return all, err
}

// GetHardwareReservation reads a hardware reservation.
func (c *Client) GetHardwareReservation(ctx context.Context, id string) (*equinixapi.HardwareReservation, error) {
	var h equinixapi.HardwareReservation
	if err := c.do(ctx, http.MethodGet, "/hardware-reservations/"+esc(id), nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}
