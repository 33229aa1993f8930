package agentclusterinstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/assisted/pkg/installstate"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// checkOverrides checks, before an install starts, what the user lays over
// it: the install-config overrides annotation always (an input error), and
// the manifests ConfigMaps once the cluster is otherwise ready to install
// (ready): upstream syncs manifests only then, so their errors show on
// SpecSynced only then. The manifests are kept for prepare.
func (in *install) checkOverrides(ctx context.Context, ready bool) {
	if in.specErr != nil || in.state != nil {
		return
	}
	inputs := installstate.Inputs{CD: in.c.CD, ACI: in.c.ACI, Version: in.version}
	if _, err := installstate.InstallConfig(inputs); err != nil {
		var oe *installstate.OverridesError
		in.specErr, in.input = err, errors.As(err, &oe)
		return
	}
	if !ready {
		return
	}
	r := in.r.configMaps
	if r == nil {
		r = in.r.Client
	}
	m, err := collectManifests(ctx, r, in.c.ACI)
	if err != nil {
		var ie *manifestInputError
		in.specErr, in.input = err, errors.As(err, &ie)
		return
	}
	in.manifests = m
}

// manifestInputError is a manifest the user must fix (upstream answers
// these with 400 Bad Request).
type manifestInputError struct{ msg string }

func (e *manifestInputError) Error() string { return e.msg }

// maxManifestSize is the largest manifest (upstream's limit: a ConfigMap's).
const maxManifestSize = 1 << 20

// manifestConfigMaps are the names of an install's manifests ConfigMaps:
// manifestsConfigMapRefs, else the deprecated manifestsConfigMapRef.
func manifestConfigMaps(aci *hiveextv1.AgentClusterInstall) []string {
	var names []string
	if aci.Spec.ManifestsConfigMapRefs != nil {
		for _, ref := range aci.Spec.ManifestsConfigMapRefs {
			names = append(names, ref.Name)
		}
		return names
	}
	if ref := aci.Spec.ManifestsConfigMapRef; ref != nil {
		names = append(names, ref.Name)
	}
	return names
}

// collectManifests reads an install's manifests: each key of its
// ConfigMaps is a manifest's file name (folder openshift). A missing
// ConfigMap is a backend error, as upstream's; so is a name in two
// ConfigMaps. A manifest that does not parse is a *manifestInputError.
func collectManifests(ctx context.Context, r client.Reader, aci *hiveextv1.AgentClusterInstall) (map[string][]byte, error) {
	var cms []*corev1.ConfigMap
	for _, name := range manifestConfigMaps(aci) {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: aci.Namespace, Name: name}, cm); err != nil {
			return nil, err // configmaps "<name>" not found: a backend error, as upstream's
		}
		cms = append(cms, cm)
	}
	return mergeManifests(string(aci.UID), cms)
}

// mergeManifests joins the ConfigMaps' manifests and checks each one.
func mergeManifests(clusterID string, cms []*corev1.ConfigMap) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, cm := range cms {
		for name, data := range cm.Data {
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("Conflict in manifest names ('%s' is not unique)", name) //nolint:staticcheck // upstream's message
			}
			out[name] = []byte(data)
		}
		for name, data := range cm.BinaryData {
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("Conflict in manifest names ('%s' is not unique)", name) //nolint:staticcheck // upstream's message
			}
			out[name] = data
		}
	}
	for name, data := range out {
		if err := checkManifest(clusterID, name, data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkManifest checks a manifest as upstream does, with its messages:
// at most 1 MiB; .yaml and .yml files hold a YAML mapping, .json files
// JSON; no other file names.
func checkManifest(clusterID, name string, data []byte) error {
	if len(data) > maxManifestSize {
		return &manifestInputError{fmt.Sprintf("Manifest content of file %s for cluster ID %s exceeds the maximum file size of 1MiB", name, clusterID)}
	}
	switch path.Ext(name) {
	case ".yaml", ".yml":
		var m map[string]any
		if yaml.Unmarshal(data, &m) != nil {
			return &manifestInputError{fmt.Sprintf("Manifest content of file %s for cluster ID %s has an invalid YAML format", name, clusterID)}
		}
	case ".json":
		if !json.Valid(data) {
			return &manifestInputError{fmt.Sprintf("Manifest content of file %s for cluster ID %s has an illegal JSON format", name, clusterID)}
		}
	default:
		return &manifestInputError{fmt.Sprintf("Manifest filename of file %s for cluster ID %s is invalid. Only json, yaml and yml extensions are supported", name, clusterID)}
	}
	return nil
}

// configMapIndex indexes AgentClusterInstalls by the manifests ConfigMaps
// they name.
const configMapIndex = "spec.manifestsConfigMapRefs.name"

// setupManifests indexes AgentClusterInstalls by their manifests
// ConfigMaps, so that a ConfigMap created or edited wakes its installs;
// ConfigMaps are watched by their metadata and read live (only when an
// install is about to start), so the hub's ConfigMaps are not cached.
func (r *Reconciler) setupManifests(mgr ctrl.Manager) error {
	r.configMaps = mgr.GetAPIReader()
	return mgr.GetFieldIndexer().IndexField(context.Background(), &hiveextv1.AgentClusterInstall{}, configMapIndex, func(o client.Object) []string {
		return manifestConfigMaps(o.(*hiveextv1.AgentClusterInstall))
	})
}

func (r *Reconciler) acisOfConfigMap(ctx context.Context, o client.Object) []ctrl.Request {
	l := &hiveextv1.AgentClusterInstallList{}
	if err := r.Client.List(ctx, l, client.InNamespace(o.GetNamespace()), client.MatchingFields{configMapIndex: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(l.Items))
	for i := range l.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
	}
	return reqs
}
