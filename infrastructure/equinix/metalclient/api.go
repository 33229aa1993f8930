package metalclient

import (
	"context"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// API is what metalshift's provider and cloud-node controller ask of a
// metal cloud: devices that boot a custom iPXE script, found by tag and
// hostname across every page, with power actions and reinstall; and
// elastic addresses reserved in a project, assigned to a device, moved and
// released. *Client is the driver for Equinix Metal.
//
// Another metal cloud of the same shape is a second driver: it implements
// API over its own service, speaking these types (the provider reads only
// the fields it sets), and reports the service's refusals as *APIError
// with the HTTP status that means the same (404 gone, 401 or 403 key
// refused, 422 refused as asked, 429 with its RateLimit, 5xx failed), so
// that IsNotFound, Backoff and the rest classify them. The hub picks the
// driver (cloud.Options.Driver in the provider's reconcilers).
type API interface {
	CreateDevice(ctx context.Context, projectID string, in equinixapi.DeviceCreateInput) (*equinixapi.Device, error)
	GetDevice(ctx context.Context, id string) (*equinixapi.Device, error)
	ListDevices(ctx context.Context, projectID string, f DeviceFilter) ([]equinixapi.Device, error)
	DeleteDevice(ctx context.Context, id string, force bool) error
	DeviceAction(ctx context.Context, id string, in equinixapi.DeviceActionInput) error

	RequestIPReservation(ctx context.Context, projectID string, in equinixapi.IPReservationRequest) (*equinixapi.IPReservation, error)
	ListIPReservations(ctx context.Context, projectID string, f IPFilter) ([]equinixapi.IPReservation, error)
	ReleaseIPReservation(ctx context.Context, id string) error
	AssignIP(ctx context.Context, deviceID, address string) (*equinixapi.IPAssignment, error)
	Unassign(ctx context.Context, assignmentID string) error
}

var _ API = (*Client)(nil)
