// Package metalmachine reconciles MetalMachine, the Cluster API
// infrastructure machine on bare metal: it claims an available
// BareMetalHost matching hostSelector (optimistic concurrency on the host's
// consumerRef keeps two machines off one host), gives it the image and the
// Machine's bootstrap data as user data, reports the providerID and the
// host's addresses once it is provisioned, and releases the host (which
// then deprovisions) on delete.
package metalmachine
