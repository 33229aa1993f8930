// Package provisioner defines how the host engine acts on a machine: the
// Provisioner interface every BMC driver implements, the parsing of BMC
// addresses, and the factory that picks a driver from an address scheme.
// No Redfish, IPMI or other vendor type crosses this interface; the state
// machine sees only what is here. Drivers live in subpackages; package
// fixture holds an honest in-memory fake for state-machine tests.
package provisioner
