// Package installer turns an install-config into the objects a hub needs to
// install an OpenShift cluster on bare metal — Cluster API objects, the
// BareMetalHosts and their BMC Secrets, the install-config and install-state
// Secrets, and the user's manifests wrapped in annotated Secrets — applies
// them, reports progress, gathers what went wrong, and tears everything
// down again.
package installer
