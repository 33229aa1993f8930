// Package webhooks holds the host engine's admission webhooks: the
// validation of metal3.io/v1alpha1 BareMetalHosts on create and update,
// served in-process by the hub manager like Cluster API's webhooks. It
// checks a host's spec on its own (no client, no reads): what a host may
// reference (only Secrets of its own namespace), and that its BMC address,
// boot MAC address, image and custom deploy are ones the engine can act on.
// It must not mutate objects or call out of the process.
package webhooks
