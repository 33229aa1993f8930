// Package component defines what a part of the hub is (a Component that
// registers controllers and webhooks with a manager), the Options every
// component receives, the scheme of every type the hub serves, and the
// Cluster API core components. It holds no reconciler logic; package
// manager lists the components of the hub, and tests pick the ones they run.
package component
