package config

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed crd/bases/*.yaml capi/crd/*.yaml capi/webhook/manifests.yaml webhook/manifests.yaml
var manifests embed.FS

// CRD sources.
const (
	// OwnCRDs are metalshift's CRDs.
	OwnCRDs = "crd/bases"
	// CAPICRDs are the upstream Cluster API core CRDs.
	CAPICRDs = "capi/crd"
)

// CRDs returns the CRDs under dir (OwnCRDs or CAPICRDs), sorted by name.
func CRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(manifests, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
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

// AllCRDs returns metalshift's CRDs followed by Cluster API's.
func AllCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	own, err := CRDs(OwnCRDs)
	if err != nil {
		return nil, err
	}
	capi, err := CRDs(CAPICRDs)
	if err != nil {
		return nil, err
	}
	return append(own, capi...), nil
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
