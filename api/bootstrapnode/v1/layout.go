// Package bootstrapnode (api/bootstrapnode/v1) is the bootstrap node's file
// layout and unit names: what the bootstrap provider's Ignition writes and
// what the OS of the bootstrap node (real, or the simulator's) reads. Both
// sides import it; a change here is a change of the contract.
package bootstrapnode

// Where the bootstrap node's config puts what the bootstrap service reads.
const (
	BootstrapDir          = "/opt/openshift"
	InstallConfigPath     = BootstrapDir + "/install-config.yaml"
	RootCACertPath        = BootstrapDir + "/tls/root-ca.crt"
	RootCAKeyPath         = BootstrapDir + "/tls/root-ca.key"
	AdminKubeconfigPath   = BootstrapDir + "/auth/kubeconfig"
	ReleaseVersionPath    = BootstrapDir + "/release-version"
	ManifestsDir          = BootstrapDir + "/manifests"
	OpenShiftManifestsDir = BootstrapDir + "/openshift"
	BootstrapServiceName  = "bootkube.service"
	// PullSecretPath is where the bootstrap node's container tools find
	// the pull secret, as on an openshift-install bootstrap node.
	PullSecretPath = "/root/.docker/config.json" //nolint:gosec // a file path, not a credential
	// BootstrapInPlacePath, when the config writes it, makes the node
	// bootstrap in place (a single-node cluster): after the bootstrap
	// service brought the control plane up, the same machine stays on as
	// the node of the role the file holds ("master"), with no bootstrap
	// node to remove.
	BootstrapInPlacePath = BootstrapDir + "/bootstrap-in-place"
)

// MachineConfigServerPort is where OpenShift's machine-config-server
// serves the configs of masters and workers (from the bootstrap node, then
// the control plane).
const MachineConfigServerPort = 22623
