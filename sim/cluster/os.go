package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/vincent-petithory/dataurl"
	"k8s.io/utils/ptr"

	bootstrapnode "github.com/metalshift/metalshift/api/bootstrapnode/v1"
	installconfig "github.com/metalshift/metalshift/api/installconfig/v1"
	"github.com/metalshift/metalshift/internal/certs"
)

// Machine is what the OS needs to know of the machine it runs on.
type Machine struct {
	ID string
	// IP is the machine's address on the machine network.
	IP string
	// UserData and MetaData are from the config drive.
	UserData, MetaData []byte
}

// metadata is the config drive's meta_data.
type metadata struct {
	Name       string `json:"name"`
	Hostname   string `json:"local-hostname"`
	ProviderID string `json:"providerid"`
}

// Run is the installed OS: it runs what the Ignition config in the user
// data says until ctx ends (the machine powers off or resets).
func (w *World) Run(ctx context.Context, m Machine) {
	if err := w.run(ctx, m); err != nil && ctx.Err() == nil {
		w.opts.Logf("%s: %v", m.ID, err)
	}
	<-ctx.Done()
}

func (w *World) run(ctx context.Context, m Machine) error {
	if len(m.UserData) == 0 {
		return errors.New("no user data: nothing to run")
	}
	cfg, rpt, err := v3_4.Parse(m.UserData)
	if err != nil || rpt.IsFatal() {
		return fmt.Errorf("ignition: the user data is not a valid Ignition 3.4 config: %v %s", err, rpt.String())
	}
	b := &booted{ctx: ctx, w: w, m: m}
	if cfg, err = b.resolve(cfg, 0); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	for _, u := range cfg.Systemd.Units {
		if u.Name == bootstrapnode.BootstrapServiceName && u.Enabled != nil && *u.Enabled {
			return w.runBootstrap(ctx, m, cfg)
		}
	}
	if b.pool == "" {
		return errors.New("the Ignition config neither runs the bootstrap service nor merges a machine-config-server's config")
	}
	return w.runNode(ctx, m, cfg, b.mcs, b.pool)
}

// booted is Ignition's first-boot fetch stage.
type booted struct {
	ctx context.Context
	w   *World
	m   Machine
	// mcs and pool are the machine-config-server's host and the pool it
	// served, once merged.
	mcs, pool string
}

// resolve does what Ignition does with ignition.config: replace the config
// or merge others into it, fetched from data URLs or http(s) with the
// given headers, trusting the config's CAs, checking verification hashes,
// and retrying a server that does not answer yet.
func (b *booted) resolve(cfg types.Config, depth int) (types.Config, error) {
	if depth > 5 {
		return cfg, errors.New("ignition: configs merge each other more than 5 deep")
	}
	var ca []byte
	for _, r := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		if r.Source != nil {
			data, err := decodeDataURL(*r.Source)
			if err != nil {
				return cfg, fmt.Errorf("ignition: certificate authority: %w", err)
			}
			ca = append(ca, data...)
		}
	}
	children := cfg.Ignition.Config.Merge
	if r := cfg.Ignition.Config.Replace; r.Source != nil {
		children = []types.Resource{r}
		cfg = types.Config{Ignition: types.Ignition{Version: cfg.Ignition.Version}}
	}
	cfg.Ignition.Config = types.IgnitionConfig{}
	for _, r := range children {
		raw, err := b.fetch(r, ca)
		if err != nil || raw == nil {
			return cfg, err
		}
		child, rpt, err := v3_4.ParseCompatibleVersion(raw)
		if err != nil || rpt.IsFatal() {
			return cfg, fmt.Errorf("ignition: config from %s: %v %s", redact(*r.Source), err, rpt.String())
		}
		if child, err = b.resolve(child, depth+1); err != nil {
			return cfg, err
		}
		cfg = v3_4.Merge(cfg, child)
	}
	return cfg, nil
}

// fetch returns a resource's content, or nil when the machine stops first.
func (b *booted) fetch(r types.Resource, ca []byte) ([]byte, error) {
	if r.Source == nil {
		return nil, errors.New("ignition: a config source has no URL")
	}
	src := *r.Source
	var data []byte
	if strings.HasPrefix(src, "data:") {
		var err error
		if data, err = decodeDataURL(src); err != nil {
			return nil, fmt.Errorf("ignition: %w", err)
		}
	} else {
		u, err := url.Parse(src)
		if err != nil {
			return nil, fmt.Errorf("ignition: config source: %w", err)
		}
		hc, err := b.w.HTTPClient(ca)
		if err != nil {
			return nil, fmt.Errorf("ignition: %w", err)
		}
		headers := http.Header{}
		for _, h := range r.HTTPHeaders {
			headers.Set(h.Name, ptr.Deref(h.Value, ""))
		}
		for attempt := 1; ; attempt++ {
			if data, err = fetch(b.ctx, hc, src, headers); err == nil {
				break
			}
			if attempt == 1 || attempt%20 == 0 {
				b.w.opts.Logf("%s: ignition: GET %s: attempt #%d: %v", b.m.ID, redact(src), attempt, err)
			}
			select {
			case <-b.ctx.Done():
				return nil, nil
			case <-time.After(time.Second):
			}
		}
		if u.Port() == strconv.Itoa(bootstrapnode.MachineConfigServerPort) && strings.HasPrefix(u.Path, "/config/") {
			b.mcs, b.pool = u.Hostname(), path.Base(u.Path)
		}
	}
	if h := r.Verification.Hash; h != nil {
		if err := verifyHash(*h, data); err != nil {
			return nil, fmt.Errorf("ignition: config from %s: %w", redact(src), err)
		}
	}
	return data, nil
}

// verifyHash checks "sha512-<hex>" or "sha256-<hex>".
func verifyHash(want string, data []byte) error {
	algo, sum, _ := strings.Cut(want, "-")
	var got []byte
	switch algo {
	case "sha512":
		s := sha512.Sum512(data)
		got = s[:]
	case "sha256":
		s := sha256.Sum256(data)
		got = s[:]
	default:
		return fmt.Errorf("unsupported hash %q", algo)
	}
	if hex.EncodeToString(got) != sum {
		return fmt.Errorf("%s mismatch: the content is not what the config pins", algo)
	}
	return nil
}

// redact drops a URL's query (signed URLs carry their signature there).
func redact(src string) string {
	s, _, _ := strings.Cut(src, "?")
	return s
}

// runBootstrap starts the cluster (or joins it, after a reboot) and holds it up.
func (w *World) runBootstrap(ctx context.Context, m Machine, cfg types.Config) error {
	files := map[string][]byte{}
	for _, f := range cfg.Storage.Files {
		if f.Contents.Source == nil {
			continue
		}
		data, err := decodeDataURL(*f.Contents.Source)
		if err != nil {
			return fmt.Errorf("ignition: file %s: %w", f.Path, err)
		}
		files[f.Path] = data
	}
	ic, err := installconfig.Parse(files[bootstrapnode.InstallConfigPath])
	if err != nil {
		return fmt.Errorf("bootkube: %w", err)
	}
	// Without API VIPs (a single node with user-managed networking) the
	// API answers at the node's own address.
	vip := ic.APIVIP()
	if vip == "" {
		vip = m.IP
	}
	b := bootstrapFiles{
		installConfig:   ic,
		vip:             vip,
		ca:              certs.KeyPair{Cert: files[bootstrapnode.RootCACertPath], Key: files[bootstrapnode.RootCAKeyPath]},
		adminKubeconfig: files[bootstrapnode.AdminKubeconfigPath],
		release:         string(files[bootstrapnode.ReleaseVersionPath]),
		manifests:       map[string][]byte{},
	}
	for p, data := range files {
		if strings.HasPrefix(p, bootstrapnode.ManifestsDir+"/") || strings.HasPrefix(p, bootstrapnode.OpenShiftManifestsDir+"/") {
			b.manifests[p] = data
		}
	}
	w.opts.Logf("%s: bootkube: starting the control plane of %s", m.ID, ic.Metadata.Name)
	var c *Cluster
	for {
		if c, err = w.acquire(ctx, b); err == nil {
			break
		}
		// The service restarts on failure, as its unit says.
		w.opts.Logf("%s: bootkube: %v; restarting in 5s", m.ID, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
	defer w.release(c)
	if role, ok := files[bootstrapnode.BootstrapInPlacePath]; ok {
		// Bootstrap in place: the same machine is the cluster's node.
		md := metadata{Name: strings.ToLower(m.ID), Hostname: hostname(cfg, m)}
		return w.kubelet(ctx, c, m, md, strings.TrimSpace(string(role)), ic.KubernetesVersion(), c.kubelet)
	}
	<-ctx.Done()
	return nil
}

// hostname is the node name of a machine: the config's /etc/hostname, else
// the machine's ID.
func hostname(cfg types.Config, m Machine) string {
	var md metadata
	if json.Unmarshal(m.MetaData, &md) == nil && md.Hostname != "" {
		return md.Hostname
	}
	for _, f := range cfg.Storage.Files {
		if f.Path == "/etc/hostname" && f.Contents.Source != nil {
			if data, err := decodeDataURL(*f.Contents.Source); err == nil {
				return strings.TrimSpace(string(data))
			}
		}
	}
	return strings.ToLower(m.ID)
}

// runNode runs the kubelet with the kubeconfig the machine-config-server
// served.
func (w *World) runNode(ctx context.Context, m Machine, cfg types.Config, mcsHost, pool string) error {
	var kubeconfig []byte
	for _, f := range cfg.Storage.Files {
		if f.Path == "/etc/kubernetes/kubeconfig" && f.Contents.Source != nil {
			kubeconfig, _ = decodeDataURL(*f.Contents.Source)
		}
	}
	if kubeconfig == nil {
		return errors.New("kubelet: the machine-config-server's config has no /etc/kubernetes/kubeconfig")
	}
	var md metadata
	if err := json.Unmarshal(m.MetaData, &md); err != nil {
		return fmt.Errorf("kubelet: reading the config drive's metadata: %w", err)
	}
	// The machine-config-server may answer before its cluster has finished
	// starting; the kubelet retries until it does, as a real one would.
	var c *Cluster
	for attempt := 1; ; attempt++ {
		if c = w.join(w.Resolve(mcsHost)); c != nil {
			break
		}
		if attempt%30 == 0 {
			w.opts.Logf("%s: kubelet: no cluster answers at %s yet", m.ID, mcsHost)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	defer w.release(c)
	return w.kubelet(ctx, c, m, md, pool, c.files.installConfig.KubernetesVersion(), kubeconfig)
}

func fetch(ctx context.Context, hc interface {
	Do(*http.Request) (*http.Response, error)
}, u string, headers http.Header) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/vnd.coreos.ignition+json;version=3.4.0")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

func decodeDataURL(s string) ([]byte, error) {
	d, err := dataurl.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return d.Data, nil
}

func dataURL(data []byte) string {
	return dataurl.New(data, "text/plain").String()
}
