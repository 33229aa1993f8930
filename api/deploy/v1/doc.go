// Package deployapi (api/deploy/v1) is the versioned contract between the host engine and
// the deploy agent that runs on a host booted from the deploy image.
//
// The agent always initiates the connection. It finds the engine URL, its
// host ID and a bearer token in its boot configuration (BootConfig: a file
// on the deploy ISO, or kernel arguments from the iPXE script), then:
//
//	GET  {engine}/deploy/v1/hosts/{id}/instructions   → Instructions
//	POST {engine}/deploy/v1/hosts/{id}/status         ← StatusReport (202)
//
// with "Authorization: Bearer <token>". A token is an HMAC of the host ID and
// an expiry, so it is per host and expires; the engine keeps no token
// table. The agent repeats its final report until the host is powered off,
// so an engine that restarts learns the outcome without redoing the work.
// Versions are path segments: a v2 will be served next to v1.
package deployapi
