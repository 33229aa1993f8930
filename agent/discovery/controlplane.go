package discovery

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vincent-petithory/dataurl"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
)

// masterLabel marks the control plane's Nodes.
const masterLabel = "node-role.kubernetes.io/master"

// controlPlaneReady is the default Options.ControlPlaneReady: it counts
// the Ready master Nodes, with client-go's kubeconfig loading and
// transport (TLS, credentials) and a plain list of Nodes: the typed
// clients would register every API group in the agent binary.
func controlPlaneReady(ctx context.Context, kubeconfig []byte) (int, error) {
	if len(kubeconfig) == 0 {
		return 0, fmt.Errorf("the bootstrap Ignition has no admin kubeconfig at %s", bootstrapnode.AdminKubeconfigPath)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("the admin kubeconfig: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, fmt.Errorf("the admin kubeconfig: %w", err)
	}
	u := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/nodes?" + url.Values{"labelSelector": {masterLabel}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("listing the masters: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("listing the masters: GET %s: %s", u, resp.Status)
	}
	var nodes corev1.NodeList
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return 0, fmt.Errorf("listing the masters: %w", err)
	}
	n := 0
	for _, node := range nodes.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// ignitionFile returns the contents of the file at path that an Ignition
// config writes (its last storage.files entry for path), when they are
// inline (a data URL, optionally gzip-compressed).
func ignitionFile(ign []byte, path string) (data []byte, found bool, err error) {
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Contents struct {
					Source      *string `json:"source"`
					Compression *string `json:"compression"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(ign, &cfg); err != nil {
		return nil, false, fmt.Errorf("not an Ignition config: %w", err)
	}
	for i := len(cfg.Storage.Files) - 1; i >= 0; i-- {
		f := cfg.Storage.Files[i]
		if f.Path != path {
			continue
		}
		if f.Contents.Source == nil {
			return nil, true, nil
		}
		if !strings.HasPrefix(*f.Contents.Source, "data:") {
			return nil, true, fmt.Errorf("%s: only inline (data URL) contents are read, not a remote source", path)
		}
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, true, fmt.Errorf("%s: %w", path, err)
		}
		data = d.Data
		if c := f.Contents.Compression; c != nil && *c != "" {
			if *c != "gzip" {
				return nil, true, fmt.Errorf("%s: unknown compression %q", path, *c)
			}
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				return nil, true, fmt.Errorf("%s: %w", path, err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				return nil, true, fmt.Errorf("%s: %w", path, err)
			}
		}
		return data, true, nil
	}
	return nil, false, nil
}
