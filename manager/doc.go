// Package manager assembles the hub's controller manager: the upstream
// Cluster API core controllers and webhooks plus every metalshift component.
// The same manager runs in-process in `metalshift hub up` and as the
// cmd/manager Deployment on a production hub.
//
// A component joins the hub by adding one line to Components. This package
// holds wiring only: no reconciler logic.
package manager
