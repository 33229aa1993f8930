// Package manifest reads and writes multi-document YAML of Kubernetes
// objects, the form the installer and the simulator exchange with users.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Decode returns the objects of a YAML or JSON stream, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// DecodeFile returns the objects of a YAML or JSON file; errors name it.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Marshal renders a typed object as YAML without the empty status and
// creationTimestamp that marshalling a new object adds.
func Marshal(obj any) ([]byte, error) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out []string
	skip := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "status: {}" || strings.TrimSpace(line) == "creationTimestamp: null":
			continue
		case line == "status:":
			skip = true
			continue
		case skip && strings.HasPrefix(line, " "):
			continue
		}
		skip = false
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n")), nil
}
