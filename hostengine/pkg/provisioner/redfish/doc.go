// Package redfish is the Redfish driver of the host engine: power, boot
// override, virtual media (redfish-virtualmedia://) or PXE (redfish://) for
// the deploy image, and out-of-band inspection. It translates Redfish into
// the provisioner interface and keeps Redfish types on its side.
package redfish
