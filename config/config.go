package config

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed crd/bases/*.yaml capi/crd/*.yaml capi/webhook/manifests.yaml capi/rbac/role.yaml webhook/manifests.yaml rbac/*/role.yaml
var manifests embed.FS

// CRD globs: every file of a source.
const (
	// OwnCRDs are metalshift's CRDs.
	OwnCRDs = "crd/bases/*.yaml"
	// CAPICRDs are the upstream Cluster API core CRDs.
	CAPICRDs = "capi/crd/*.yaml"
)

// CRDs returns the CRDs in the embedded files that globs match (path.Match
// patterns such as OwnCRDs, CAPICRDs or "crd/bases/metal3.io_*.yaml"),
// each once, sorted by name. A glob that matches no file is an error.
func CRDs(globs ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	seen := map[string]bool{}
	var files []string
	for _, g := range globs {
		matches, err := fs.Glob(manifests, g)
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("no CRD file matches %q", g)
		}
		for _, f := range matches {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		docs, err := documents(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: unexpected kind %q", f, crd.Kind)
			}
			crds = append(crds, crd)
		}
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	return crds, nil
}

// CAPIWebhooks returns the upstream Cluster API core admission webhook
// configurations, whose clientConfig names an in-cluster Service.
func CAPIWebhooks() ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return webhookConfigurations("capi/webhook/manifests.yaml")
}

// OwnWebhooks returns metalshift's admission webhook configurations
// (generated from the kubebuilder markers of the webhooks packages), whose
// clientConfig names an in-cluster Service.
func OwnWebhooks() ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return webhookConfigurations("webhook/manifests.yaml")
}

// RBAC is a role generated from the kubebuilder RBAC markers of some
// packages: the rules of the markers without a namespace, granted in every
// namespace, and per namespace the rules of those that name one.
type RBAC struct {
	ClusterRules []rbacv1.PolicyRule
	Namespaced   map[string][]rbacv1.PolicyRule
}

// GeneratedRBAC returns the role `make generate` wrote to
// rbac/<name>/role.yaml: one per clusterctl provider, named by its label
// (infrastructure-metal, ...), and baremetal-operator, the bare-metal
// operator's.
func GeneratedRBAC(name string) (*RBAC, error) {
	f := "rbac/" + name + "/role.yaml"
	docs, err := documents(f)
	if err != nil {
		return nil, err
	}
	out := &RBAC{Namespaced: map[string][]rbacv1.PolicyRule{}}
	for _, doc := range docs {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(doc, role); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out.ClusterRules = append(out.ClusterRules, role.Rules...)
		case "Role":
			role := &rbacv1.Role{}
			if err := yaml.UnmarshalStrict(doc, role); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out.Namespaced[role.Namespace] = append(out.Namespaced[role.Namespace], role.Rules...)
		default:
			return nil, fmt.Errorf("%s: unexpected kind %q", f, meta.Kind)
		}
	}
	return out, nil
}

// CAPIRules are the rules of the upstream Cluster API core manager's
// ClusterRole.
func CAPIRules() ([]rbacv1.PolicyRule, error) {
	docs, err := documents(capiRole)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: want one ClusterRole, found %d documents", capiRole, len(docs))
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(docs[0], role); err != nil {
		return nil, fmt.Errorf("%s: %w", capiRole, err)
	}
	if role.Kind != "ClusterRole" {
		return nil, fmt.Errorf("%s: unexpected kind %q", capiRole, role.Kind)
	}
	return role.Rules, nil
}

const capiRole = "capi/rbac/role.yaml"

func webhookConfigurations(f string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	docs, err := documents(f)
	if err != nil {
		return nil, nil, err
	}
	var (
		mutating   []*admissionregistrationv1.MutatingWebhookConfiguration
		validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	)
	for _, doc := range docs {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
			mutating = append(mutating, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
			validating = append(validating, v)
		default:
			return nil, nil, fmt.Errorf("%s: unexpected kind %q", f, meta.Kind)
		}
	}
	return mutating, validating, nil
}

// documents splits a multi-document YAML file, dropping empty documents.
func documents(name string) ([][]byte, error) {
	data, err := manifests.ReadFile(name)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 && !onlyComments(doc) {
			docs = append(docs, doc)
		}
	}
}

func onlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}
