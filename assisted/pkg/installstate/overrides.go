package installstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/ignition"
)

// InstallConfigOverridesAnnotation on an AgentClusterInstall holds JSON
// laid over the install-config the install renders.
const InstallConfigOverridesAnnotation = "agent-install.openshift.io/install-config-overrides"

// OverridesError is an install-config overrides annotation that does not
// apply: a user's input error.
type OverridesError struct{ Err error }

func (e *OverridesError) Error() string {
	return fmt.Sprintf("Failed to parse '%s' annotation: %v", InstallConfigOverridesAnnotation, e.Err)
}

func (e *OverridesError) Unwrap() error { return e.Err }

// ApplyOverrides lays the JSON object raw over ic, as the upstream service
// does: objects merge field by field, recursively; any other value (lists
// included) replaces what was there; null clears a list or an optional
// object (networking, platform.baremetal, ...) and leaves other fields
// alone (encoding/json's rules). A field
// the install-config does not know is an error, so that a typo does not
// pass silently; so is a secret (the pull secret, BMC credentials), which
// the install-config the bootstrap node gets must not hold. Errors are
// *OverridesError, and leave ic half-merged.
func ApplyOverrides(ic *installconfig.InstallConfig, raw string) error {
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ic); err != nil {
		return &OverridesError{Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &OverridesError{Err: errors.New("unexpected data after the JSON object")}
	}
	if f := secretField(ic); f != "" {
		return &OverridesError{Err: fmt.Errorf("%s cannot be overridden: the install-config the bootstrap node gets holds no secrets "+
			"(the pull secret is the ClusterDeployment's pullSecretRef)", f)}
	}
	return nil
}

// secretField names the first field of ic that holds a secret (as
// installconfig.HasSecrets reads them); "" when none does.
func secretField(ic *installconfig.InstallConfig) string {
	if ic.PullSecret != "" {
		return "pullSecret"
	}
	if bm := ic.Platform.BareMetal; bm != nil {
		for i, h := range bm.Hosts {
			switch {
			case h.BMC.Username != "":
				return fmt.Sprintf("platform.baremetal.hosts[%d].bmc.username", i)
			case h.BMC.Password != "":
				return fmt.Sprintf("platform.baremetal.hosts[%d].bmc.password", i)
			case metal3v1.BMCAddressWithoutUserinfo(h.BMC.Address) != h.BMC.Address:
				return fmt.Sprintf("platform.baremetal.hosts[%d].bmc.address's userinfo", i)
			}
		}
	}
	return ""
}

// Manifest folder and Secret keys of the user's manifests.
const (
	// ManifestsFolder is the installer folder user manifests go to.
	ManifestsFolder = "openshift"
	// manifestKeyPrefix prefixes a manifest's file name in the
	// install-state Secret (keys cannot hold a '/').
	manifestKeyPrefix = "manifests." + ManifestsFolder + "."
)

// ManifestKey is the install-state Secret key of a user manifest.
func ManifestKey(name string) string { return manifestKeyPrefix + name }

// manifestsData adds the manifests to Secret data.
func manifestsData(data map[string][]byte, manifests map[string][]byte) {
	for name, m := range manifests {
		data[ManifestKey(name)] = m
	}
}

// manifestsFromData reads the manifests out of Secret data.
func manifestsFromData(data map[string][]byte) map[string][]byte {
	var out map[string][]byte
	for k, v := range data {
		if name, ok := strings.CutPrefix(k, manifestKeyPrefix); ok {
			if out == nil {
				out = map[string][]byte{}
			}
			out[name] = v
		}
	}
	return out
}

// bootstrapManifests are the manifests as the bootstrap node's files, by
// name.
func bootstrapManifests(manifests map[string][]byte) []ignition.Manifest {
	out := make([]ignition.Manifest, 0, len(manifests))
	for name, data := range manifests {
		out = append(out, ignition.Manifest{Dir: ManifestsFolder, Name: name, Data: bytes.Clone(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
