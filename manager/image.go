package manager

// The manager's container image, which `make images` builds (hack/images)
// and a production hub's Deployments run (manager/providers); the
// simulator's installed clusters run its containers in process
// (cmd/metalshift/simruntime).
const (
	// ImageRepository is the repository of the manager's image; its tags
	// are metalshift's versions (v0.1.0). A registry of one's own keeps
	// the path after the registry host, metalshift/manager.
	ImageRepository = "ghcr.io/metalshift/manager"

	// ImageLiveDir is the directory of the image that holds the live
	// images real machines boot (metalshift-live.iso, .vmlinuz, .initrd),
	// for the --live-image-dir of the components that serve them.
	ImageLiveDir = "/usr/share/metalshift/live"
)
