// Package redfish is metalshift's own Redfish client (no Redfish library is
// on the Go module proxy): sessions with a fallback to Basic auth, ETag /
// If-Match on PATCH, ComputerSystem.Reset, boot source override,
// VirtualMedia insert and eject, inventory, and task monitors for
// asynchronous actions. TLS is verified unless the caller opts out. It holds
// no Kubernetes types and never logs credentials.
package redfish
