// Package redfish is metalshift's own Redfish client (no Redfish library is
// on the Go module proxy): sessions with a fallback to Basic auth, ETag /
// If-Match on PATCH, ComputerSystem.Reset, boot source override,
// VirtualMedia insert and eject, inventory, and task monitors for
// asynchronous actions. TLS is verified unless the caller opts out. It holds
// no Kubernetes types and never logs credentials.
//
// A BMC is not trusted: connections are opened only where the caller's
// egress.Policy allows (checked on the resolved address, before anything is
// sent); links, task monitors and redirects are followed only on the BMC's
// own origin; replies are capped at MaxReplyBytes and collections, and the
// resources one call reaches through links, at MaxMembers.
package redfish
