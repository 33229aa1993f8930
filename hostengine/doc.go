// Package hostengine is the host engine: it manages BareMetalHosts over
// Redfish and IPMI without Ironic or a database. Setup registers the
// BareMetalHost reconciler and starts the deploy server that hosts and their
// deploy agents talk to.
package hostengine
