// Package deployapi (api/deploy/v1) is the versioned contract between the host engine and
// the deploy agent that runs on a host booted from the deploy image.
//
// The agent always initiates the connection. It finds the engine URL, its
// host ID and a one-request ticket in its boot configuration (BootConfig: a
// file in the deploy ISO's host region or iPXE's host initrd, or the
// answer to a lookup), then:
//
//	POST {engine}/deploy/v1/hosts/{id}/token          ← TokenRequest, ticket as bearer → TokenResponse
//	GET  {engine}/deploy/v1/hosts/{id}/instructions   → Instructions
//	POST {engine}/deploy/v1/hosts/{id}/status         ← StatusReport (202)
//
// The ticket is an HMAC of the host ID, the request's generation and an
// expiry; the token it is exchanged for is random, handed out once per
// request (the engine keeps its SHA-256 in the host's status), and refused
// once the request's report is final or the request is gone. The agent
// stops asking once its final report is accepted. Versions are path
// segments: a v2 will be served next to v1.
package deployapi
