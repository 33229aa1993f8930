// Package v1alpha1 holds the metal3.io/v1alpha1 types served by metalshift's
// host engine (BareMetalHost, PreprovisioningImage) and by the bare-metal
// operator (Provisioning). Group, version, kinds
// and JSON field names match metal3's API so that YAML and tools written for
// metal3 work unchanged; the Go code is metalshift's own. Types, constants
// and small helpers only: no client, no controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=metal3.io
package v1alpha1
