// Package manager lists the components of the hub's manager: the upstream
// Cluster API core and every metalshift component, each declared in its own
// package (see package component). The same list runs in-process in
// `metalshift hub up` and as the cmd/manager Deployment on a production
// hub; both build the manager with component.NewManager.
//
// It is apart from package component only because the components' packages
// import component, and their reconciler tests import it through
// internal/testenv. It holds the list, the hub's scheme, Run (a manager
// in-process from a command line) and the name of the manager's image: no
// wiring, no reconciler logic.
package manager
