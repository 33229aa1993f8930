package deployserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/hostengine/pkg/provisioner"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/reconciler"
	"github.com/metalshift/metalshift/internal/serving"
	"github.com/metalshift/metalshift/internal/shard"
)

// Paths of the images.
const (
	ISOPath    = "/images/deploy.iso"
	IPXEPath   = "/images/deploy.ipxe"
	KernelPath = "/images/deploy-kernel"
	InitrdPath = "/images/deploy-initrd"
	// HostInitrdPath is the host's own initrd: its boot configuration.
	HostInitrdPath = "/images/deploy-host.img"
	// PXEPath is where network-booting hosts find their iPXE script by the
	// MAC address they boot from (the provisioning network's DHCP points
	// iPXE at PXEPath${net0/mac}).
	PXEPath = "/boot/by-mac/"
)

// Server serves hosts. Create it with New. It keeps no state of its own:
// what a host must do is its BareMetalHost's status.deployAgent.request,
// the agent token handed out for it is recorded (hashed) in
// status.deployAgent.token, and an agent's report is written to
// status.deployAgent.report, so any number of replicas can serve the same
// hosts.
type Server struct {
	client    client.Client
	apiReader client.Reader
	writes    *reconciler.Writes
	recorder  events.EventRecorder
	key       []byte
	baseURL   string
	// imageBase is where the files an iPXE script loads are fetched:
	// baseURL, or the boot URL of BootHandler.
	imageBase string
	ca        *serving.CA
	clock     clock.PassiveClock
	ttl       time.Duration
	images    *imageservice.Images
	shard     string
	// tokenStatus is Options.TokenStatus.
	tokenStatus func(host *metal3v1.BareMetalHost)
}

// Options configure a Server.
type Options struct {
	// Client reads BareMetalHosts (a cached client suits: agents poll) and
	// their Secrets, and patches the hosts' status with tokens and reports.
	Client client.Client
	// APIReader reads a host again when the cached copy may be behind the
	// engine's last write (a boot it just started); nil means Client.
	APIReader client.Reader
	// Writes records the server's writes of hosts, and holds the engine's
	// (its reconciler writes through the same Writes' client): a host whose
	// cached copy is older than the last of them is read from APIReader
	// before the server decides on it and writes it, so that a write
	// guarded by the host's resourceVersion is not refused for a copy the
	// cache has not caught up with. Nil records none: the cached copy is
	// used as read, and such a write is refused and asked again.
	Writes *reconciler.Writes
	// Recorder records an Event when a request's agent token is asked for
	// again; nil records none.
	Recorder events.EventRecorder
	// Key signs tickets and URLs; keep it across restarts.
	Key []byte
	// BaseURL is how hosts reach this server, e.g. https://192.0.2.1:6180.
	BaseURL string
	// CA is what hosts trust for BaseURL (https), put in their boot
	// configuration; nil for plain http.
	CA *serving.CA
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// TTL is how long image URLs and the tickets in them stay valid; 0
	// means DefaultTTL.
	TTL time.Duration
	// Images are the deploy images served; nil means the light images,
	// which only simulated machines boot (see imageservice.LightImages).
	Images *imageservice.Images
	// WatchFilterValue is the shard of the server's manager (package
	// shard): the server serves the hosts labelled
	// cluster.x-k8s.io/watch-filter=<value> only, as if the others did not
	// exist; empty means all.
	WatchFilterValue string
	// TokenStatus, when set, updates what the engine derives from a host's
	// token record (its DeployAgentToken condition) in the status the
	// server writes with the record: one write where the engine's would be
	// a second.
	TokenStatus func(host *metal3v1.BareMetalHost)
}

// DefaultTTL is how long a deploy image's URLs and ticket are valid: the
// engine boots the image as soon as it signs them, and boots it again
// with new ones when the agent does not report within its timeout.
const DefaultTTL = time.Hour

// New returns a Server.
func New(opts Options) (*Server, error) {
	if len(opts.Key) < 16 {
		return nil, errors.New("the deploy server needs a signing key of at least 16 bytes")
	}
	if _, err := url.Parse(opts.BaseURL); err != nil || opts.BaseURL == "" {
		return nil, fmt.Errorf("invalid deploy server URL %q", opts.BaseURL)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.APIReader == nil {
		opts.APIReader = opts.Client
	}
	if opts.Images == nil {
		im, err := imageservice.LightImages()
		if err != nil {
			return nil, fmt.Errorf("building the light deploy images: %w", err)
		}
		opts.Images = im
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")
	c := opts.Client
	if opts.Writes != nil {
		c = opts.Writes.Client(c)
	}
	return &Server{client: c, apiReader: opts.APIReader, writes: opts.Writes, recorder: opts.Recorder, key: opts.Key,
		baseURL: base, imageBase: base, ca: opts.CA, clock: opts.Clock, ttl: opts.TTL, images: opts.Images, shard: opts.WatchFilterValue,
		tokenStatus: opts.TokenStatus}, nil
}

// CheckBootConfig makes host's boot configuration as its deploy image
// will carry it and says what keeps the image from being made or used: a
// network data Secret that is missing or not nmstate the live image can
// apply, or a configuration too large for the image's host region. The
// engine calls it before it boots the agent, so that a person reads the
// cause in the host's status instead of waiting for the agent's timeout.
func (s *Server) CheckBootConfig(ctx context.Context, host *metal3v1.BareMetalHost) error {
	cfg, err := s.hostBootConfig(ctx, host, generation(host), s.clock.Now().Add(s.ttl))
	if err != nil {
		return err
	}
	if cfg.NetworkData != "" {
		if _, err := deployapi.ParseNetworkConfig([]byte(cfg.NetworkData)); err != nil {
			return fmt.Errorf("secret %s/%s, key nmstate: %w", host.Namespace, host.Spec.PreprovisioningNetworkDataName, err)
		}
	}
	_, err = imageservice.HostRegion(cfg)
	return err
}

// HostID is the deploy ID of host.
func HostID(host *metal3v1.BareMetalHost) string {
	return deployapi.HostID(host.Namespace, host.Name, string(host.UID))
}

// DeployImage returns freshly signed URLs of the deploy image for host's
// current request.
func (s *Server) DeployImage(host *metal3v1.BareMetalHost) provisioner.DeployImage {
	id, gen, exp := HostID(host), generation(host), s.clock.Now().Add(s.ttl)
	return provisioner.DeployImage{ISOURL: s.signedURL(s.baseURL, ISOPath, id, gen, exp), IPXEURL: s.signedURL(s.baseURL, IPXEPath, id, gen, exp)}
}

// signedURL is the URL of path at base, signed for request gen of host id
// until exp.
func (s *Server) signedURL(base, path, id, gen string, exp time.Time) string {
	return base + path + "?" + deployapi.SignHostURLQuery(s.key, path, id, gen, exp)
}

func generation(host *metal3v1.BareMetalHost) string {
	if req := host.DeployAgentRequest(); req != nil {
		return req.Generation
	}
	return ""
}

// awaitingAgent reports whether the engine has booted (or is booting) the
// deploy image for the host's current request and its agent has not got
// the request's token yet: the only time a boot configuration with the
// request's ticket is handed out by MAC address or lookup.
func awaitingAgent(host *metal3v1.BareMetalHost) bool {
	req := host.DeployAgentRequest()
	return req != nil && (req.BootStartedAt != nil || req.BootedAt != nil) && host.DeployAgentToken() == nil && host.DeployAgentReport() == nil
}

// networkBoots: the engine boots host's deploy image over the network
// (PXE). A host booted from virtual media gets its image from its BMC
// alone: its boot script is never served by MAC address, so that knowing
// its MAC gets nothing even while it boots.
func networkBoots(host *metal3v1.BareMetalHost) bool {
	addr, err := metal3v1.ParseBMCAddress(host.Spec.BMC.Address)
	return err == nil && !addr.VirtualMedia
}

// ended reports whether the current request's report is final: its token
// is refused from then on.
func ended(host *metal3v1.BareMetalHost) bool {
	rep := host.DeployAgentReport()
	return rep != nil && rep.Phase != deployapi.PhaseRunning
}

// Handler serves the images and the agent API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ISOPath, s.serveISO)
	mux.HandleFunc("GET "+IPXEPath, s.serveIPXE)
	mux.HandleFunc("GET "+KernelPath, s.serveKernel)
	mux.HandleFunc("GET "+InitrdPath, s.serveKernel)
	mux.HandleFunc("GET "+HostInitrdPath, s.serveHostInitrd)
	mux.HandleFunc("GET "+PXEPath+"{mac}", s.serveByMAC)
	mux.HandleFunc("POST /deploy/v1/hosts/{id}/token", s.token)
	mux.HandleFunc("GET /deploy/v1/hosts/{id}/instructions", s.instructions)
	mux.HandleFunc("POST /deploy/v1/hosts/{id}/status", s.status)
	mux.HandleFunc("POST "+deployapi.LookupPath, s.lookup)
	s.addMetalCloud(mux)
	return mux
}

// cachedHost returns the host of id from the client's cache, or from the
// API when the cached copy is older than the last write of the host that
// Writes recorded (the engine's or this server's); nil when there is none.
func (s *Server) cachedHost(ctx context.Context, id string) (*metal3v1.BareMetalHost, error) {
	ns, name, _, err := deployapi.ParseHostID(id)
	if err != nil {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	host := &metal3v1.BareMetalHost{}
	if err := s.client.Get(ctx, key, host); err != nil {
		if apierrors.IsNotFound(err) {
			s.writes.Forget(host, key)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if s.writes.Behind(host) {
		return s.apiHost(ctx, id)
	}
	if HostID(host) != id || !shard.Owns(s.shard, host) {
		return nil, nil
	}
	return host, nil
}

// currentHost is cachedHost, read again from the API when the cached copy
// is missing or want does not hold for it: the cache may be behind another
// replica's write. Callers have checked a signature first.
func (s *Server) currentHost(ctx context.Context, id string, want func(*metal3v1.BareMetalHost) bool) (*metal3v1.BareMetalHost, error) {
	host, err := s.cachedHost(ctx, id)
	if err != nil || host != nil && want(host) {
		return host, err
	}
	return s.apiHost(ctx, id)
}

// apiHost reads the host of id from the API; nil when there is none.
// Callers have checked a signature first.
func (s *Server) apiHost(ctx context.Context, id string) (*metal3v1.BareMetalHost, error) {
	ns, name, _, err := deployapi.ParseHostID(id)
	if err != nil {
		return nil, nil
	}
	host := &metal3v1.BareMetalHost{}
	if err := s.apiReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, host); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if HostID(host) != id || !shard.Owns(s.shard, host) {
		return nil, nil
	}
	return host, nil
}

// isCurrent is true for a host whose current request is gen.
func isCurrent(gen string) func(*metal3v1.BareMetalHost) bool {
	return func(h *metal3v1.BareMetalHost) bool { return generation(h) == gen }
}

// imageHost verifies a signed image URL and returns its host, which has
// the URL's request as its current one; it answers the request itself
// otherwise. spent refuses a request whose token was handed out already.
func (s *Server) imageHost(w http.ResponseWriter, r *http.Request, spent bool) (*metal3v1.BareMetalHost, deployapi.HostURL, bool) {
	u, err := deployapi.VerifyHostURL(s.key, r.URL.Path, r.URL.Query(), s.clock.Now())
	if err != nil {
		http.Error(w, "invalid or expired image URL", http.StatusForbidden)
		return nil, u, false
	}
	var host *metal3v1.BareMetalHost
	if spent {
		// The boot configuration: decided on the API's copy, which has the
		// token's record as soon as it is handed out.
		host, err = s.apiHost(r.Context(), u.HostID)
	} else {
		host, err = s.currentHost(r.Context(), u.HostID, isCurrent(u.Generation))
	}
	switch {
	case err != nil:
		http.Error(w, "reading the host failed; retry", http.StatusServiceUnavailable)
		return nil, u, false
	case host == nil:
		http.Error(w, "unknown host", http.StatusNotFound)
		return nil, u, false
	case generation(host) != u.Generation || ended(host):
		http.Error(w, fmt.Sprintf("this image is for request %s, which is not the host's current request", u.Generation), http.StatusGone)
		return nil, u, false
	case spent && host.DeployAgentToken() != nil:
		http.Error(w, fmt.Sprintf("the deploy agent of request %s has its token: its boot configuration is not served again", u.Generation), http.StatusGone)
		return nil, u, false
	}
	return host, u, true
}

// hostBootConfig is what the agent of host is told for request gen: the
// request's ticket, expiring with the URL it was served from (every request
// of one URL gets the same bytes, so a BMC may read an ISO in ranges), and
// the host's preprovisioning network data.
func (s *Server) hostBootConfig(ctx context.Context, host *metal3v1.BareMetalHost, gen string, expiry time.Time) (deployapi.BootConfig, error) {
	id, ns := HostID(host), host.Namespace
	cfg := deployapi.BootConfig{EngineURL: s.baseURL, HostID: id, Ticket: deployapi.SignTicket(s.key, id, gen, expiry), CACert: string(s.ca.PEM())}
	if n := host.Spec.PreprovisioningNetworkDataName; n != "" {
		// nmstate only: the networkData key holds OpenStack's
		// network_data.json, for the config drive.
		data, err := s.secretData(ctx, ns, &corev1.SecretReference{Name: n}, "nmstate")
		if err != nil {
			return cfg, err
		}
		cfg.NetworkData = string(data)
	}
	return cfg, nil
}

func (s *Server) serveISO(w http.ResponseWriter, r *http.Request) {
	// The ISO is served for as long as its request is current, also after
	// the agent got its token: a BMC reads virtual media in ranges, and
	// every read must see the same bytes. Its ticket is spent by then.
	host, u, ok := s.imageHost(w, r, false)
	if !ok {
		return
	}
	// The host's region is made only when a range reaches it (a BMC reads
	// the ISO in many ranges); a host whose configuration cannot be made
	// (a missing network data Secret) fails its download there.
	iso := s.images.LazyISO(func() ([]byte, error) {
		cfg, err := s.hostBootConfig(r.Context(), host, u.Generation, u.Expiry)
		if err != nil {
			return nil, err
		}
		return imageservice.HostRegion(cfg)
	})
	w.Header().Set("Content-Type", "application/x-iso9660-image")
	// It carries the request's ticket.
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "deploy.iso", s.images.ModTime, iso)
}

func (s *Server) serveIPXE(w http.ResponseWriter, r *http.Request) {
	if _, u, ok := s.imageHost(w, r, true); ok {
		s.writeIPXE(w, u.HostID, u.Generation, u.Expiry)
	}
}

// writeIPXE writes the iPXE script that boots the deploy agent of host id
// for request gen.
func (s *Server) writeIPXE(w http.ResponseWriter, id, gen string, exp time.Time) {
	signed := func(path string) string { return s.signedURL(s.imageBase, path, id, gen, exp) }
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(imageservice.DeployIPXEScript(signed(KernelPath), signed(InitrdPath), signed(HostInitrdPath))))
}

// serveKernel serves the deploy kernel and initramfs, the same bytes for
// every host (HTTP ranges work).
func (s *Server) serveKernel(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.imageHost(w, r, false); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if r.URL.Path == InitrdPath {
		http.ServeContent(w, r, "initrd.img", s.images.ModTime, s.images.Initrd())
		return
	}
	http.ServeContent(w, r, "vmlinuz", s.images.ModTime, s.images.Kernel())
}

// serveHostInitrd serves the host's own initrd: its boot configuration,
// until the request's token is handed out.
func (s *Server) serveHostInitrd(w http.ResponseWriter, r *http.Request) {
	host, u, ok := s.imageHost(w, r, true)
	if !ok {
		return
	}
	cfg, err := s.hostBootConfig(r.Context(), host, u.Generation, u.Expiry)
	if err != nil {
		http.Error(w, "the host's boot configuration: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	b, err := imageservice.HostInitrd(cfg)
	if err != nil {
		http.Error(w, "building the host's initrd failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "host.img", time.Time{}, bytes.NewReader(b))
}

// agentHost authenticates an agent with the agent token of its host's
// current request and returns the host, the request and the token's
// record. The host comes from the cache, or from the API while the cache is
// behind a write Writes recorded (a token this server just handed out, a
// request the engine just wrote): a token another replica just handed out
// may be refused for a moment, and the agent asks again.
func (s *Server) agentHost(w http.ResponseWriter, r *http.Request) (*metal3v1.BareMetalHost, *metal3v1.DeployAgentRequest, *metal3v1.DeployAgentToken, bool) {
	host, err := s.cachedHost(r.Context(), r.PathValue("id"))
	if err != nil {
		http.Error(w, "reading the host failed; retry", http.StatusServiceUnavailable)
		return nil, nil, nil, false
	}
	return authorize(w, r, host)
}

// authorize answers an agent whose token is not the one of host's current
// request (host may be nil), or whose request has ended; it returns the
// request and the token's record otherwise.
func authorize(w http.ResponseWriter, r *http.Request, host *metal3v1.BareMetalHost) (*metal3v1.BareMetalHost, *metal3v1.DeployAgentRequest, *metal3v1.DeployAgentToken, bool) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var rec *metal3v1.DeployAgentToken
	if host != nil {
		rec = host.DeployAgentToken()
	}
	// An unknown host, no token handed out, another request's or host's
	// token: the same answer.
	if rec == nil || !deployapi.AgentTokenMatches(tok, rec.SHA256) {
		http.Error(w, "invalid agent token: it is not the token of the host's current request", http.StatusUnauthorized)
		return nil, nil, nil, false
	}
	if rep := host.DeployAgentReport(); ended(host) {
		http.Error(w, fmt.Sprintf("request %s ended %s: its token is no longer accepted", rec.Generation, rep.Phase), http.StatusGone)
		return nil, nil, nil, false
	}
	return host, host.DeployAgentRequest(), rec, true
}

func (s *Server) instructions(w http.ResponseWriter, r *http.Request) {
	host, _, _, ok := s.agentHost(w, r)
	if !ok {
		return
	}
	ins, err := s.instructionsFor(r.Context(), host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(ins)
}

func (s *Server) instructionsFor(ctx context.Context, host *metal3v1.BareMetalHost) (*deployapi.Instructions, error) {
	req := host.DeployAgentRequest()
	switch {
	case req.Action == deployapi.ActionClean, req.Action == deployapi.ActionInspect:
		return &deployapi.Instructions{Action: req.Action, Generation: req.Generation}, nil
	case req.Action == deployapi.ActionCustomDeploy:
		if req.CustomDeploy == nil || req.CustomDeploy.Method == "" {
			return nil, fmt.Errorf("request %s of host %s has no custom deploy method", req.Generation, host.Name)
		}
		ins := &deployapi.Instructions{Action: req.Action, Generation: req.Generation, CustomDeploy: req.CustomDeploy.Method}
		if ins.CustomDeploy == deployapi.MethodStartAssistedInstall {
			ins.RegistrationProof = assistedapi.SignHostProof(s.key, assistedapi.HostProof{Namespace: host.Namespace, Name: host.Name,
				UID: string(host.UID), Expires: s.clock.Now().Add(assistedapi.HostProofLifetime)})
		}
		return ins, nil
	case req.Action != deployapi.ActionDeploy || req.Image == nil:
		return nil, fmt.Errorf("request %s of host %s has no image", req.Generation, host.Name)
	}
	img := req.Image
	ins := &deployapi.Instructions{Action: deployapi.ActionDeploy, Generation: req.Generation, Image: &deployapi.Image{
		URL: img.URL, Checksum: img.Checksum, ChecksumType: string(img.ChecksumType),
	}}
	if img.DiskFormat != nil {
		ins.Image.Format = *img.DiskFormat
	}
	if h := host.Spec.RootDeviceHints; h != nil {
		ins.RootDeviceHints = &deployapi.RootDeviceHints{
			DeviceName: h.DeviceName, HCTL: h.HCTL, Model: h.Model, Vendor: h.Vendor, SerialNumber: h.SerialNumber,
			MinSizeGigabytes: h.MinSizeGigabytes, WWN: h.WWN, Rotational: h.Rotational,
		}
	}
	if errs := metal3v1.ValidateSecretNamespaces(host); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	var err error
	if ins.UserData, err = s.secretData(ctx, host.Namespace, host.Spec.UserData, "userData", "value"); err != nil {
		return nil, err
	}
	netRef := host.Spec.NetworkData
	if netRef == nil && host.Spec.PreprovisioningNetworkDataName != "" {
		netRef = &corev1.SecretReference{Name: host.Spec.PreprovisioningNetworkDataName}
	}
	if ins.NetworkData, err = s.secretData(ctx, host.Namespace, netRef, "networkData", "nmstate"); err != nil {
		return nil, err
	}
	if ins.MetaData, err = s.secretData(ctx, host.Namespace, host.Spec.MetaData, "metaData"); err != nil {
		return nil, err
	}
	if ins.MetaData == nil {
		ins.MetaData, _ = json.Marshal(map[string]string{"uuid": string(host.UID), "name": host.Name, "local-hostname": host.Name})
	}
	return ins, nil
}

// secretData reads the first of keys from the Secret ref names. A host may
// only use Secrets of its own namespace (ValidateSecretNamespaces refused
// any other before this is called), so ref.Namespace is not followed.
func (s *Server) secretData(ctx context.Context, ns string, ref *corev1.SecretReference, keys ...string) ([]byte, error) {
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	sec := &corev1.Secret{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, sec); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", ns, ref.Name, err)
	}
	for _, k := range keys {
		if v, ok := sec.Data[k]; ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("secret %s/%s has none of the keys %v", ns, ref.Name, keys)
}

// status records an agent's report in its host's status. The write is
// guarded by the host's resourceVersion, so two replicas cannot both let
// two boots of an agent claim one request: a running report from another
// session than the one that claimed the request, or than the one the
// token was handed to, is refused with 409. After a conflict (another
// writer wrote the host since it was read) the host is read from the API
// and the report checked and written again on it, up to tokenAttempts
// times.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	host, _, _, ok := s.agentHost(w, r)
	if !ok {
		return
	}
	var rep deployapi.StatusReport
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&rep); err != nil {
		http.Error(w, "invalid report: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch rep.Phase {
	case deployapi.PhaseRunning, deployapi.PhaseDone, deployapi.PhaseFailed:
	default:
		http.Error(w, fmt.Sprintf("invalid report: unknown phase %q", rep.Phase), http.StatusBadRequest)
		return
	}
	for attempt := 1; ; attempt++ {
		var req *metal3v1.DeployAgentRequest
		var rec *metal3v1.DeployAgentToken
		if host, req, rec, ok = authorize(w, r, host); !ok || !checkReport(w, host, req, rec, &rep) {
			return
		}
		err := s.writeReport(r.Context(), host, req, &rep)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusAccepted)
			return
		case apierrors.IsConflict(err) && attempt < tokenAttempts:
			if host, err = s.apiHost(r.Context(), r.PathValue("id")); err != nil {
				http.Error(w, "reading the host failed; report again", http.StatusServiceUnavailable)
				return
			}
		case apierrors.IsConflict(err):
			http.Error(w, "the host changed; report again", http.StatusServiceUnavailable)
			return
		default:
			http.Error(w, "recording the report failed", http.StatusServiceUnavailable)
			return
		}
	}
}

// checkReport answers a report that is not written on host: one of
// another request or session than the token's, of another boot than the
// one that claimed the request, an inspect report without inventory (all
// refused), or a repeated one (accepted: nothing new).
func checkReport(w http.ResponseWriter, host *metal3v1.BareMetalHost, req *metal3v1.DeployAgentRequest, rec *metal3v1.DeployAgentToken, rep *deployapi.StatusReport) bool {
	if req.Generation != rep.Generation {
		http.Error(w, fmt.Sprintf("request %q is not the host's current request", rep.Generation), http.StatusConflict)
		return false
	}
	if rep.Session != rec.Session {
		http.Error(w, fmt.Sprintf("reports of request %s come from the boot of the agent its token was handed to", rep.Generation), http.StatusConflict)
		return false
	}
	prev := host.DeployAgentReport()
	if prev != nil && prev.Session != rep.Session {
		http.Error(w, fmt.Sprintf("request %s was claimed by another boot of the agent", rep.Generation), http.StatusConflict)
		return false
	}
	if rep.Phase == deployapi.PhaseDone && req.Action == deployapi.ActionInspect && rep.Inventory == nil {
		http.Error(w, "invalid report: an inspect report carries the inventory", http.StatusBadRequest)
		return false
	}
	// A running report with more bytes written is the agent's progress
	// (its heartbeat while it writes an image): recorded, so that the
	// report's time says when the agent was last heard of.
	if prev != nil && prev.Phase == rep.Phase && prev.Message == rep.Message && prev.RootDevice == rep.RootDevice && prev.BytesWritten == rep.BytesWritten {
		w.WriteHeader(http.StatusAccepted) // a repeated report: nothing new
		return false
	}
	return true
}

// writeReport patches rep into host's status with the host's
// resourceVersion.
func (s *Server) writeReport(ctx context.Context, host *metal3v1.BareMetalHost, req *metal3v1.DeployAgentRequest, rep *deployapi.StatusReport) error {
	base := host.DeepCopy()
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{
		Generation: rep.Generation, Phase: rep.Phase, Message: rep.Message, RootDevice: rep.RootDevice,
		BytesWritten: rep.BytesWritten, Session: rep.Session, Time: metav1.NewTime(s.clock.Now().Truncate(time.Second)),
	}
	if req.Action == deployapi.ActionInspect {
		host.Status.DeployAgent.Report.HardwareDetails = HardwareDetails(rep.Inventory)
	}
	return s.client.Status().Patch(ctx, host, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// serveByMAC answers a network-booting host: the deploy iPXE script of its
// current request while the engine boots its agent and the request's token
// was not handed out, 404 (boot the next device) otherwise. The script
// carries only that boot's signed URLs, and so that request's ticket.
func (s *Server) serveByMAC(w http.ResponseWriter, r *http.Request) {
	mac := r.PathValue("mac")
	hosts := &metal3v1.BareMetalHostList{}
	if err := s.client.List(r.Context(), hosts, shard.ListOptions(s.shard)...); err != nil {
		http.Error(w, "listing hosts failed", http.StatusServiceUnavailable)
		return
	}
	host, n := ByBootMAC(hosts.Items, mac)
	switch {
	case n > 1:
		// Booting one of them could hand one host's ticket to another.
		http.Error(w, fmt.Sprintf("%d BareMetalHosts have boot MAC %s: none is network-booted until spec.bootMACAddress is unique", n, mac), http.StatusConflict)
		return
	case n == 0:
		http.Error(w, "no network boot for "+mac, http.StatusNotFound)
		return
	}
	// Decided on the API's copy: the engine may have just started the
	// boot, or the agent just got its token.
	host, err := s.apiHost(r.Context(), HostID(host))
	if err != nil {
		http.Error(w, "reading the host failed", http.StatusServiceUnavailable)
		return
	}
	if host == nil || !awaitingAgent(host) || !networkBoots(host) {
		http.Error(w, "no network boot for "+mac, http.StatusNotFound)
		return
	}
	s.writeIPXE(w, HostID(host), generation(host), s.clock.Now().Add(s.ttl))
}

// ByBootMAC returns the host whose spec.bootMACAddress is mac (letter case
// aside) and how many hosts have it: the host is set only when one does.
func ByBootMAC(hosts []metal3v1.BareMetalHost, mac string) (*metal3v1.BareMetalHost, int) {
	var found *metal3v1.BareMetalHost
	n := 0
	for i := range hosts {
		if mac != "" && strings.EqualFold(hosts[i].Spec.BootMACAddress, mac) {
			found, n = &hosts[i], n+1
		}
	}
	if n != 1 {
		return nil, n
	}
	return found, n
}

// HardwareDetails converts an agent's inventory to a BareMetalHost's
// hardware details; nil stays nil.
func HardwareDetails(inv *deployapi.Inventory) *metal3v1.HardwareDetails {
	if inv == nil {
		return nil
	}
	hw := &metal3v1.HardwareDetails{
		SystemVendor: metal3v1.HardwareSystemVendor{
			Manufacturer: inv.SystemVendor.Manufacturer, ProductName: inv.SystemVendor.ProductName, SerialNumber: inv.SystemVendor.SerialNumber,
		},
		RAMMebibytes: int(inv.MemoryBytes >> 20),
		CPU: metal3v1.CPU{Arch: inv.CPU.Architecture, Model: inv.CPU.Model, Count: inv.CPU.Count,
			ClockMegahertz: metal3v1.ClockSpeed(inv.CPU.MHz)},
	}
	for _, n := range inv.NICs {
		hw.NIC = append(hw.NIC, metal3v1.NIC{Name: n.Name, MAC: n.MAC, SpeedGbps: n.SpeedMbps / 1000})
	}
	for _, d := range inv.Disks {
		typ := metal3v1.DiskType("SSD")
		switch {
		case strings.HasPrefix(d.Name, "/dev/nvme"):
			typ = "NVME"
		case d.Rotational:
			typ = "HDD"
		}
		hw.Storage = append(hw.Storage, metal3v1.Storage{Name: d.Name, Rotational: d.Rotational, Type: typ, SizeBytes: metal3v1.Capacity(d.SizeBytes),
			Vendor: d.Vendor, Model: d.Model, SerialNumber: d.SerialNumber, WWN: d.WWN, HCTL: d.HCTL})
	}
	return hw
}
