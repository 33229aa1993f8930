// Package webhooks holds the host engine's admission webhooks: the
// validation of metal3.io/v1alpha1 BareMetalHosts on create and update,
// served in-process by the hub manager like Cluster API's webhooks. It
// checks a host's spec on its own: what a host may reference (only Secrets
// of its own namespace, only ClusterDeployments of its own namespace in
// the agent-based install's cluster-reference annotation), and that its
// BMC address, boot MAC address, image and custom deploy are ones the
// engine can act on. Its one read is the list of the hub's hosts, when a
// boot MAC is set or changed: a boot MAC is unique on the hub. It must not
// mutate objects or call out of the process.
package webhooks
