package agentclusterinstall

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
)

// TestManifestConfigMaps: manifestsConfigMapRefs wins over the deprecated
// manifestsConfigMapRef, even when empty.
func TestManifestConfigMaps(t *testing.T) {
	one := &corev1.LocalObjectReference{Name: "old"}
	for _, tt := range []struct {
		name string
		spec hiveextv1.AgentClusterInstallSpec
		want []string
	}{
		{"none", hiveextv1.AgentClusterInstallSpec{}, nil},
		{"deprecated", hiveextv1.AgentClusterInstallSpec{ManifestsConfigMapRef: one}, []string{"old"}},
		{"list", hiveextv1.AgentClusterInstallSpec{ManifestsConfigMapRefs: []hiveextv1.ManifestsConfigMapReference{{Name: "a"}, {Name: "b"}}}, []string{"a", "b"}},
		{"list wins", hiveextv1.AgentClusterInstallSpec{ManifestsConfigMapRef: one,
			ManifestsConfigMapRefs: []hiveextv1.ManifestsConfigMapReference{{Name: "a"}}}, []string{"a"}},
		{"empty list wins", hiveextv1.AgentClusterInstallSpec{ManifestsConfigMapRef: one,
			ManifestsConfigMapRefs: []hiveextv1.ManifestsConfigMapReference{}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(manifestConfigMaps(&hiveextv1.AgentClusterInstall{Spec: tt.spec})).To(Equal(tt.want))
		})
	}
}

// TestMergeManifests: the ConfigMaps' keys are the manifests' names; a
// name twice is a conflict (upstream's message, not an input error); each
// manifest is checked with upstream's input errors.
func TestMergeManifests(t *testing.T) {
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
	}
	const mc = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-kargs\n"
	for _, tt := range []struct {
		name  string
		cms   []*corev1.ConfigMap
		want  []string
		err   string
		input bool
	}{
		{name: "none", want: []string{}},
		{name: "two ConfigMaps", cms: []*corev1.ConfigMap{cm("a", map[string]string{"99_a.yaml": mc, "b.json": `{"kind":"x"}`}), cm("b", map[string]string{"c.yml": mc})},
			want: []string{"99_a.yaml", "b.json", "c.yml"}},
		{name: "empty YAML", cms: []*corev1.ConfigMap{cm("a", map[string]string{"e.yaml": ""})}, want: []string{"e.yaml"}},
		{name: "duplicate", cms: []*corev1.ConfigMap{cm("a", map[string]string{"99_a.yaml": mc}), cm("b", map[string]string{"99_a.yaml": mc})},
			err: "Conflict in manifest names ('99_a.yaml' is not unique)"},
		{name: "bad YAML", cms: []*corev1.ConfigMap{cm("a", map[string]string{"bad.yaml": "kind: [MachineConfig\n"})},
			err: "Manifest content of file bad.yaml for cluster ID uid-1 has an invalid YAML format", input: true},
		{name: "YAML list", cms: []*corev1.ConfigMap{cm("a", map[string]string{"list.yaml": "- a\n- b\n"})},
			err: "Manifest content of file list.yaml for cluster ID uid-1 has an invalid YAML format", input: true},
		{name: "bad JSON", cms: []*corev1.ConfigMap{cm("a", map[string]string{"bad.json": "{"})},
			err: "Manifest content of file bad.json for cluster ID uid-1 has an illegal JSON format", input: true},
		{name: "other extension", cms: []*corev1.ConfigMap{cm("a", map[string]string{"notes.txt": "hi"})},
			err: "Manifest filename of file notes.txt for cluster ID uid-1 is invalid. Only json, yaml and yml extensions are supported", input: true},
		{name: "too big", cms: []*corev1.ConfigMap{cm("a", map[string]string{"big.yaml": "a: " + strings.Repeat("x", 1<<20)})},
			err: "Manifest content of file big.yaml for cluster ID uid-1 exceeds the maximum file size of 1MiB", input: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := mergeManifests("uid-1", tt.cms)
			if tt.err != "" {
				g.Expect(err).To(MatchError(tt.err))
				_, input := err.(*manifestInputError)
				g.Expect(input).To(Equal(tt.input))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			names := []string{}
			for n := range got {
				names = append(names, n)
			}
			g.Expect(names).To(ConsistOf(tt.want))
		})
	}
}
