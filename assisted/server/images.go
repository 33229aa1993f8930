package server

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	ignitionconfig "github.com/coreos/ignition/v2/config"
	"github.com/google/uuid"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	"github.com/metalshift/metalshift/assisted/pkg/record"
	"github.com/metalshift/metalshift/imageservice"
)

// Image paths; {id} is the InfraEnv's ID.
const (
	imagePrefix   = "/images/infra-envs/"
	isoFile       = "discovery.iso"
	ipxeFile      = "ipxe-script"
	kernelFile    = "kernel"
	initrdFile    = "initrd"
	configFile    = "config.img"
	imageURLValid = 7 * 24 * time.Hour
)

// ImageURLs are the signed URLs of an InfraEnv's discovery image.
type ImageURLs struct {
	ISO, IPXEScript, Kernel, Initrd string
	Expires                         time.Time
}

// ImageURLs signs the URLs of the image of ie whose content has digest,
// valid from now for a week. A new digest (the image changed) makes new
// URLs; the old ones stop working.
func (s *Server) ImageURLs(ie *agentinstallv1.InfraEnv, digest string, now time.Time) ImageURLs {
	exp := now.Add(imageURLValid).Truncate(time.Second)
	return ImageURLs{ISO: s.signed(ie, digest, isoFile, exp), IPXEScript: s.signed(ie, digest, ipxeFile, exp),
		Kernel: s.signed(ie, digest, kernelFile, exp), Initrd: s.signed(ie, digest, initrdFile, exp), Expires: exp}
}

func (s *Server) signed(ie *agentinstallv1.InfraEnv, digest, file string, exp time.Time) string {
	path := imagePrefix + string(ie.UID) + "/" + file
	return s.opts.BaseURL + path + "?" + deployapi.SignURLQuery(s.opts.Key, path, string(ie.UID)+"."+digest, exp)
}

func (s *Server) imageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+imagePrefix+"{id}/{file}", s.serveImage)
}

func (s *Server) serveImage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	id, digest := r.PathValue("id"), ""
	if host := q.Get("host"); len(host) > len(id)+1 && host[:len(id)] == id && host[len(id)] == '.' {
		digest = host[len(id)+1:]
	}
	if digest == "" || deployapi.VerifyURL(s.opts.Key, r.URL.Path, q.Get("host"), q.Get("expires"), q.Get("signature"), s.opts.Clock.Now()) != nil {
		http.Error(w, "invalid or expired image URL", http.StatusForbidden)
		return
	}
	ie, err := s.infraEnvByID(ctx, id)
	if err != nil {
		http.Error(w, "infra env not found", http.StatusNotFound)
		return
	}
	cfg, current, err := s.DiscoveryConfig(ctx, ie)
	if err != nil {
		http.Error(w, "the image cannot be made: "+err.Error(), http.StatusConflict)
		return
	}
	if current != digest {
		http.Error(w, "the InfraEnv's image changed: download it from its new status.isoDownloadURL", http.StatusGone)
		return
	}
	unix, _ := strconv.ParseInt(q.Get("expires"), 10, 64)
	exp := time.Unix(unix, 0)
	if cfg.Lookup != nil {
		// The lookup credential expires with the image's URL.
		cfg.Lookup.Token = deployapi.SignLookupToken(s.opts.Key, cfg.Lookup.Scope, exp)
	}
	w.Header().Set("Cache-Control", "no-store")
	switch r.PathValue("file") {
	case isoFile:
		iso, err := s.opts.Images.ISO(cfg)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/x-iso9660-image")
		http.ServeContent(w, r, isoFile, s.opts.Images.ModTime, iso)
	case ipxeFile:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(imageservice.DeployIPXEScript(s.signed(ie, digest, kernelFile, exp), s.signed(ie, digest, initrdFile, exp),
			s.signed(ie, digest, configFile, exp))))
	case kernelFile:
		http.ServeContent(w, r, kernelFile, s.opts.Images.ModTime, s.opts.Images.Kernel())
	case initrdFile:
		http.ServeContent(w, r, initrdFile, s.opts.Images.ModTime, s.opts.Images.Initrd())
	case configFile:
		data, err := imageservice.HostInitrd(cfg)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		_, _ = w.Write(data)
	default:
		http.NotFound(w, r)
	}
}

// pemOf is the PEM ca returns now; "" without one.
func pemOf(ca func() []byte) string {
	if ca == nil {
		return ""
	}
	return string(ca())
}

// DiscoveryConfig is the boot configuration the image of ie carries, and
// its digest: what changes the image. It fails when the configuration
// cannot be made (NMStateConfigs that do not validate, an image region too
// small for it).
func (s *Server) DiscoveryConfig(ctx context.Context, ie *agentinstallv1.InfraEnv) (deployapi.BootConfig, string, error) {
	d := &deployapi.Discovery{
		ServiceURL: s.opts.BaseURL, InfraEnvID: string(ie.UID), Token: "",
		NTPSources:       append(append([]string(nil), ie.Spec.AdditionalNTPSources...), ie.Spec.NTPSources...),
		SSHAuthorizedKey: ie.Spec.SSHAuthorizedKey, AdditionalTrustBundle: ie.Spec.AdditionalTrustBundle,
	}
	if p := ie.Spec.Proxy; p != nil {
		d.HTTPProxy, d.HTTPSProxy, d.NoProxy = p.HTTPProxy, p.HTTPSProxy, p.NoProxy
	}
	for _, k := range ie.Spec.KernelArguments {
		d.KernelArguments = append(d.KernelArguments, deployapi.KernelArgument{Operation: k.Operation, Value: k.Value})
	}
	static, err := record.StaticNetwork(ctx, s.opts.Client, ie)
	if err != nil {
		return deployapi.BootConfig{}, "", err
	}
	d.StaticNetwork = static
	if o := ie.Spec.IgnitionConfigOverride; o != "" {
		if _, _, err := ignitionconfig.Parse([]byte(o)); err != nil {
			return deployapi.BootConfig{}, "", record.InputError(fmt.Errorf("error parsing ignition: %w", err))
		}
		d.IgnitionConfigOverride = o
	}
	d.CACert = pemOf(s.opts.CA)
	cfg := deployapi.BootConfig{Discovery: d}
	if agentinstallv1.ConvergedImage(ie) {
		if s.opts.DeployURL == "" {
			return cfg, "", record.InputError(fmt.Errorf("InfraEnv %s is annotated %s, but the agent service does not know the host engine's deploy URL (--agent-service-deploy-url)",
				ie.Name, agentinstallv1.EnableIronicAgentAnnotation))
		}
		cfg.Lookup = &deployapi.Lookup{EngineURL: s.opts.DeployURL, Scope: ImageScope(ie)}
		cfg.CACert = pemOf(s.opts.DeployCA) // the deploy agent's, for the lookup and its host's API
	}
	parts := []any{d, string(ie.Spec.ImageType), ie.Spec.CpuArchitecture}
	if cfg.Lookup != nil {
		parts = append(parts, cfg.Lookup, cfg.CACert)
	}
	digest := record.Digest(parts...)
	d.Token = assistedToken(s.opts.Key, ie)
	if cfg.Lookup != nil {
		// Sized here with a week's expiry; serveImage signs it with its URL's.
		cfg.Lookup.Token = deployapi.SignLookupToken(s.opts.Key, cfg.Lookup.Scope, s.opts.Clock.Now().Add(imageURLValid))
	}
	initrd, err := imageservice.HostInitrd(cfg)
	if err != nil {
		return cfg, "", err
	}
	// Upstream bounds the compressed archive of the discovery Ignition, and
	// only when an override is set; ours carries the same configuration.
	if d.IgnitionConfigOverride != "" {
		if n := gzipSize(initrd); n > maxDiscoveryArchive {
			return cfg, "", record.InputError(fmt.Errorf("The ignition archive size (%d KiB) is over the maximum allowable size (%d KiB)", //nolint:staticcheck // upstream's text
				n/1024, maxDiscoveryArchive/1024))
		}
	}
	if _, err := imageservice.HostRegion(cfg); err != nil {
		return cfg, "", record.InputError(err)
	}
	return cfg, digest, nil
}

// ImageScope is the scope of the lookup credential of ie's image: the path
// of its ISO URL, which a PreprovisioningImage serving it has.
func ImageScope(ie *agentinstallv1.InfraEnv) string {
	return imagePrefix + string(ie.UID) + "/" + isoFile
}

// maxDiscoveryArchive is upstream's bound on the compressed discovery
// configuration of an image with an ignitionConfigOverride.
const maxDiscoveryArchive = 256 << 10

// gzipSize is the size of data gzip-compressed.
func gzipSize(data []byte) int {
	var n countingWriter
	zw := gzip.NewWriter(&n)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return int(n)
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// validHostID tells whether id is a host ID: a UUID.
func validHostID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// events is status.debugInfo.eventsURL's route; events are not served yet.
func assistedToken(key []byte, ie *agentinstallv1.InfraEnv) string {
	return assistedapi.SignAgentToken(key, string(ie.UID))
}
