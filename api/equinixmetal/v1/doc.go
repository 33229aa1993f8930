// Package equinixapi (api/equinixmetal/v1) holds the JSON shapes of the
// Equinix Metal API that metalshift speaks: the subset its typed client
// (infrastructure/equinix/metalclient) sends and reads, and that the
// emulator (sim/equinix) serves. The service was sunset in 2026 and no Go
// client for it is published any more, so these types are written from
// the published API's field names, not generated from its specification.
//
// Every path is under APIPrefix and every call carries the key in
// AuthHeader:
//
//	GET/POST        /metal/v1/projects                 ← ProjectCreateInput → Project, ProjectList
//	GET/DELETE      /metal/v1/projects/{id}
//	GET/POST        /metal/v1/projects/{id}/devices    ← DeviceCreateInput → 201 Device; DeviceList (?page, ?per_page, ?tag)
//	GET/PUT/DELETE  /metal/v1/devices/{id}             ← DeviceUpdateInput; DELETE ?force_delete=true → 204
//	POST            /metal/v1/devices/{id}/actions     ← DeviceActionInput → 202
//	GET/POST        /metal/v1/devices/{id}/ips         ← IPAssignmentInput → 201 IPAssignment; IPAssignmentList
//	GET/POST        /metal/v1/projects/{id}/ips        ← IPReservationRequest → 201 IPReservation; IPReservationList
//	GET/PATCH/DELETE /metal/v1/ips/{id}               DELETE: an assignment is unassigned, a reservation released
//	GET             /metal/v1/plans, /metal/v1/locations/metros, /metal/v1/operating-systems
//
// Lists carry a Meta block for their pages. Errors are an ErrorResponse.
// Every answer carries the rate-limit headers (RateLimitLimitHeader, ...).
//
// The metadata service, which a device reaches from its own addresses
// without a key, answers GET /metadata with Metadata and GET /userdata
// with the device's userdata as given.
package equinixapi
