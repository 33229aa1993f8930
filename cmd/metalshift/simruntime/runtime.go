// Package simruntime is the container runtime of the simulated installed
// clusters' nodes for metalshift's own image: a container of the manager
// image runs as a manager in this process, with the container's arguments
// and the Pod's service-account credentials, as the image's entrypoint
// would run in a Pod. Other images run as the simulator's kubelet runs
// them: without a process.
package simruntime

import (
	"context"
	"strings"

	"github.com/metalshift/metalshift/manager"
	"github.com/metalshift/metalshift/sim/cluster"
)

// managerPath is the path of the manager's image in any registry:
// manager.ImageRepository without its registry host.
var managerPath = func() string {
	_, path, _ := strings.Cut(manager.ImageRepository, "/")
	return path
}()

// Manager runs containers of the manager image.
type Manager struct{}

var _ cluster.Runtime = Manager{}

// Runs tells whether image is the manager's: …/metalshift/manager[:tag|@digest].
func (Manager) Runs(image string) bool {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name == managerPath || strings.HasSuffix(name, "/"+managerPath)
}

// Run runs the manager with the container's arguments until ctx is done.
func (Manager) Run(ctx context.Context, c cluster.Container) error {
	return manager.Run(ctx, c.Config, c.Args)
}
