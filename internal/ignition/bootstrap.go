package ignition

import (
	"errors"
	"fmt"
	"path"
	"sort"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/utils/ptr"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
)

// Manifest is one user manifest for the bootstrap node.
type Manifest struct {
	// Dir is "manifests" or "openshift", the installer directory it came from.
	Dir string
	// Name is the file name.
	Name string
	// Data is the file's content.
	Data []byte
}

// BootstrapOptions describe the bootstrap node's config.
type BootstrapOptions struct {
	// InstallConfig is install-config.yaml as installconfig.Sanitize
	// returns it: without the pull secret and BMC credentials. A copy that
	// holds either is refused.
	InstallConfig []byte
	// PullSecret is the pull secret the bootstrap node pulls the release
	// with, written to bootstrapnode.PullSecretPath (0600); empty writes no file.
	PullSecret []byte
	// Manifests are the user's manifests and openshift manifests.
	Manifests []Manifest
	// RootCACert and RootCAKey are the cluster's root CA (PEM), from the install state.
	RootCACert, RootCAKey []byte
	// AdminKubeconfig is the installer's admin kubeconfig.
	AdminKubeconfig []byte
	// ReleaseVersion is the OpenShift release installed.
	ReleaseVersion string
	// Override is an Ignition config merged after the rendered one.
	Override []byte
	// InPlace makes the node bootstrap in place and stay on as a master
	// (single-node clusters; bootstrapnode.BootstrapInPlacePath).
	InPlace bool
}

// bootstrapUnit starts the temporary control plane from /opt/openshift.
const bootstrapUnit = `[Unit]
Description=Bootstrap an OpenShift cluster
Wants=network-online.target
After=network-online.target

[Service]
WorkingDirectory=` + bootstrapnode.BootstrapDir + `
ExecStart=/usr/local/bin/bootkube.sh
Restart=on-failure
RestartSec=5s

[Install]
WantedBy=multi-user.target
`

// Bootstrap renders the bootstrap node's config: install-config, user
// manifests, the root CA and admin kubeconfig, and the bootstrap service.
func Bootstrap(o BootstrapOptions) ([]byte, error) {
	switch {
	case len(o.InstallConfig) == 0:
		return nil, errors.New("the install-config is empty")
	case len(o.RootCACert) == 0 || len(o.RootCAKey) == 0:
		return nil, errors.New("the root CA certificate or key is empty")
	case len(o.AdminKubeconfig) == 0:
		return nil, errors.New("the admin kubeconfig is empty")
	}
	leaks, err := installconfig.HasSecrets(o.InstallConfig)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInstallConfigHasSecrets, err)
	case leaks:
		return nil, ErrInstallConfigHasSecrets
	}
	cfg := types.Config{Ignition: types.Ignition{Version: Version}}
	files := []types.File{
		file(bootstrapnode.InstallConfigPath, o.InstallConfig, 0o600),
		file(bootstrapnode.RootCACertPath, o.RootCACert, 0o644),
		file(bootstrapnode.RootCAKeyPath, o.RootCAKey, 0o600),
		file(bootstrapnode.AdminKubeconfigPath, o.AdminKubeconfig, 0o600),
		file(bootstrapnode.ReleaseVersionPath, []byte(o.ReleaseVersion), 0o644),
	}
	if len(o.PullSecret) > 0 {
		files = append(files, file(bootstrapnode.PullSecretPath, o.PullSecret, 0o600))
	}
	if o.InPlace {
		files = append(files, file(bootstrapnode.BootstrapInPlacePath, []byte("master"), 0o644))
	}
	ms := append([]Manifest(nil), o.Manifests...)
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Dir != ms[j].Dir {
			return ms[i].Dir < ms[j].Dir
		}
		return ms[i].Name < ms[j].Name
	})
	seen := map[string]bool{}
	for _, m := range ms {
		var dir string
		switch m.Dir {
		case "manifests":
			dir = bootstrapnode.ManifestsDir
		case "openshift":
			dir = bootstrapnode.OpenShiftManifestsDir
		default:
			return nil, fmt.Errorf("manifest %s: directory %q is neither manifests nor openshift", m.Name, m.Dir)
		}
		if m.Name == "" || path.Base(m.Name) != m.Name || m.Name == "." || m.Name == ".." {
			return nil, fmt.Errorf("manifest name %q must be a plain file name", m.Name)
		}
		p := path.Join(dir, m.Name)
		if seen[p] {
			return nil, fmt.Errorf("two manifests are named %s", p)
		}
		seen[p] = true
		files = append(files, file(p, m.Data, 0o644))
	}
	cfg.Storage.Files = files
	cfg.Systemd.Units = []types.Unit{{Name: bootstrapnode.BootstrapServiceName, Enabled: ptr.To(true), Contents: ptr.To(bootstrapUnit)}}
	if len(o.Override) > 0 {
		if err := validateOverride(o.Override); err != nil {
			return nil, err
		}
		cfg.Ignition.Config.Merge = []types.Resource{{Source: ptr.To(dataURL(o.Override))}}
	}
	return marshalValid(cfg)
}

func file(p string, data []byte, mode int) types.File {
	return types.File{
		Node: types.Node{Path: p, Overwrite: ptr.To(true)},
		FileEmbedded1: types.FileEmbedded1{
			Mode:     ptr.To(mode),
			Contents: types.Resource{Source: ptr.To(dataURL(data))},
		},
	}
}
