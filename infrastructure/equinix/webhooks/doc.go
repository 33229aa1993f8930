// Package webhooks holds the admission webhooks of the Equinix Metal
// infrastructure provider's kinds (EquinixMetalCluster,
// EquinixMetalMachine, EquinixMetalMachineTemplate), served in-process by
// the hub manager. The CRDs check what a schema can say (required fields,
// patterns, enums, defaults, metro or facility); these webhooks check the
// rest and what may change: a cluster's project, credentials and location
// are fixed once created, a machine's spec is fixed but for providerID (set
// once) and tags, and a template's spec is fixed. Every refusal names its
// field.
//
// The webhooks judge an object from itself and its previous version: they
// read nothing, write nothing and never call the Equinix Metal API.
package webhooks
