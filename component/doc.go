// Package component is the hub's component model. A Component declares, in
// one value, the types it serves or reads, the CRDs it serves, its
// command-line flags and how it registers with a manager; NewManager builds
// a manager configured as Cluster API expects, creates the services every
// component shares (Hub: the manager, Cluster API's ClusterCache, a clock,
// the namespace and watch filter, whether webhooks are served, the signing
// key) and sets the components up. The hub-wide flags are Options.
//
// The package also runs the upstream Cluster API core, unmodified, as the
// components CAPICore and CAPIWebhooks.
//
// Each metalshift component declares itself in its package's setup.go
// (hostengine.Component, bootstrap.Component, ...); package manager lists
// the hub's components, and tests pick the ones they run. This package
// holds no reconciler logic and imports no component package (not even a
// component's webhooks): reconciler tests import it through
// internal/testenv, which also runs the components' admission webhooks.
package component
