package deployserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/baremetal/pkg/provisioner"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/serving"
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
// and an agent's report is written to status.deployAgent.report, so any
// number of replicas can serve the same hosts.
type Server struct {
	client  client.Client
	key     []byte
	baseURL string
	// imageBase is where the files an iPXE script loads are fetched:
	// baseURL, or the boot URL of BootHandler.
	imageBase string
	ca        *serving.CA
	clock     clock.PassiveClock
	ttl       time.Duration
	images    *imageservice.Images
}

// Options configure a Server.
type Options struct {
	// Client reads BareMetalHosts (a cached client suits: agents poll) and
	// their Secrets, and patches the hosts' status with reports.
	Client client.Client
	// Key signs tokens and URLs; keep it across restarts.
	Key []byte
	// BaseURL is how hosts reach this server, e.g. https://192.0.2.1:6180.
	BaseURL string
	// CA is what hosts trust for BaseURL (https), put in their boot
	// configuration; nil for plain http.
	CA *serving.CA
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// TTL is how long URLs and agent tokens stay valid; 0 means 24 hours.
	TTL time.Duration
	// Images are the deploy images served; nil means the light images,
	// which only simulated machines boot (see imageservice.LightImages).
	Images *imageservice.Images
}

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
		opts.TTL = 24 * time.Hour
	}
	if opts.Images == nil {
		im, err := imageservice.LightImages()
		if err != nil {
			return nil, fmt.Errorf("building the light deploy images: %w", err)
		}
		opts.Images = im
	}
	base := strings.TrimSuffix(opts.BaseURL, "/")
	return &Server{client: opts.Client, key: opts.Key, baseURL: base, imageBase: base, ca: opts.CA, clock: opts.Clock, ttl: opts.TTL,
		images: opts.Images}, nil
}

// CheckBootConfig makes host's boot configuration as its deploy image
// will carry it and says what keeps the image from being made or used: a
// network data Secret that is missing or not nmstate the live image can
// apply, or a configuration too large for the image's host region. The
// engine calls it before it boots the agent, so that a person reads the
// cause in the host's status instead of waiting for the agent's timeout.
func (s *Server) CheckBootConfig(ctx context.Context, host *metal3v1.BareMetalHost) error {
	cfg, err := s.hostBootConfig(ctx, host, s.clock.Now().Add(s.ttl))
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

// DeployImage returns freshly signed URLs of the deploy image for host.
func (s *Server) DeployImage(host *metal3v1.BareMetalHost) provisioner.DeployImage {
	id := HostID(host)
	exp := s.clock.Now().Add(s.ttl)
	return provisioner.DeployImage{
		ISOURL:  s.baseURL + ISOPath + "?" + deployapi.SignURLQuery(s.key, ISOPath, id, exp),
		IPXEURL: s.baseURL + IPXEPath + "?" + deployapi.SignURLQuery(s.key, IPXEPath, id, exp),
	}
}

// Request returns the host's current deploy agent request, or nil.
func Request(host *metal3v1.BareMetalHost) *metal3v1.DeployAgentRequest {
	if host.Status.DeployAgent == nil {
		return nil
	}
	return host.Status.DeployAgent.Request
}

// Report returns the agent's report for the host's current request, or nil.
func Report(host *metal3v1.BareMetalHost) *metal3v1.DeployAgentReport {
	req := Request(host)
	if req == nil || host.Status.DeployAgent.Report == nil || host.Status.DeployAgent.Report.Generation != req.Generation {
		return nil
	}
	return host.Status.DeployAgent.Report
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
	mux.HandleFunc("GET /deploy/v1/hosts/{id}/instructions", s.instructions)
	mux.HandleFunc("POST /deploy/v1/hosts/{id}/status", s.status)
	mux.HandleFunc("POST "+deployapi.LookupPath, s.lookup)
	return mux
}

// signedHost verifies a signed image URL and returns its host ID and
// expiry.
func (s *Server) signedHost(w http.ResponseWriter, r *http.Request) (string, time.Time, bool) {
	q := r.URL.Query()
	id := q.Get("host")
	if err := deployapi.VerifyURL(s.key, r.URL.Path, id, q.Get("expires"), q.Get("signature"), s.clock.Now()); err != nil {
		http.Error(w, "invalid or expired image URL", http.StatusForbidden)
		return "", time.Time{}, false
	}
	unix, _ := strconv.ParseInt(q.Get("expires"), 10, 64) // VerifyURL parsed it
	return id, time.Unix(unix, 0), true
}

// bootConfig is what the agent of host id is told. Its token expires with
// the URL it was served from: every request of one URL gets the same bytes,
// so a BMC may read an ISO in ranges. The host's preprovisioning network
// data goes along.
func (s *Server) bootConfig(ctx context.Context, id string, expiry time.Time) (deployapi.BootConfig, error) {
	ns, name, _, err := deployapi.ParseHostID(id)
	if err != nil {
		return deployapi.BootConfig{}, err
	}
	host := &metal3v1.BareMetalHost{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, host); err != nil || HostID(host) != id {
		return deployapi.BootConfig{}, fmt.Errorf("unknown host")
	}
	return s.hostBootConfig(ctx, host, expiry)
}

// hostBootConfig is bootConfig for a host at hand.
func (s *Server) hostBootConfig(ctx context.Context, host *metal3v1.BareMetalHost, expiry time.Time) (deployapi.BootConfig, error) {
	id, ns := HostID(host), host.Namespace
	cfg := deployapi.BootConfig{EngineURL: s.baseURL, HostID: id, Token: deployapi.SignToken(s.key, id, expiry), CACert: string(s.ca.PEM())}
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
	id, exp, ok := s.signedHost(w, r)
	if !ok {
		return
	}
	// The host's region is made only when a range reaches it (a BMC reads
	// the ISO in many ranges); a host whose configuration cannot be made
	// (a missing network data Secret) fails its download there.
	iso := s.images.LazyISO(func() ([]byte, error) {
		cfg, err := s.bootConfig(r.Context(), id, exp)
		if err != nil {
			return nil, err
		}
		return imageservice.HostRegion(cfg)
	})
	w.Header().Set("Content-Type", "application/x-iso9660-image")
	// It carries the host's agent token.
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "deploy.iso", s.images.ModTime, iso)
}

func (s *Server) serveIPXE(w http.ResponseWriter, r *http.Request) {
	id, exp, ok := s.signedHost(w, r)
	if !ok {
		return
	}
	s.writeIPXE(w, id, exp)
}

// writeIPXE writes the iPXE script that boots host id's deploy agent.
func (s *Server) writeIPXE(w http.ResponseWriter, id string, exp time.Time) {
	signed := func(path string) string {
		return s.imageBase + path + "?" + deployapi.SignURLQuery(s.key, path, id, exp)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(imageservice.DeployIPXEScript(signed(KernelPath), signed(InitrdPath), signed(HostInitrdPath))))
}

// serveKernel serves the deploy kernel and initramfs, the same bytes for
// every host (HTTP ranges work).
func (s *Server) serveKernel(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.signedHost(w, r); !ok {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if r.URL.Path == InitrdPath {
		http.ServeContent(w, r, "initrd.img", s.images.ModTime, s.images.Initrd())
		return
	}
	http.ServeContent(w, r, "vmlinuz", s.images.ModTime, s.images.Kernel())
}

// serveHostInitrd serves the host's own initrd: its boot configuration.
func (s *Server) serveHostInitrd(w http.ResponseWriter, r *http.Request) {
	id, exp, ok := s.signedHost(w, r)
	if !ok {
		return
	}
	cfg, err := s.bootConfig(r.Context(), id, exp)
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

// agentHost authenticates an agent and loads its host.
func (s *Server) agentHost(w http.ResponseWriter, r *http.Request) (*metal3v1.BareMetalHost, string, bool) {
	id := r.PathValue("id")
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := deployapi.VerifyToken(s.key, id, tok, s.clock.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return nil, "", false
	}
	ns, name, _, err := deployapi.ParseHostID(id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, "", false
	}
	host := &metal3v1.BareMetalHost{}
	if err := s.client.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, host); err != nil || HostID(host) != id {
		http.Error(w, "unknown host", http.StatusNotFound)
		return nil, "", false
	}
	return host, id, true
}

func (s *Server) instructions(w http.ResponseWriter, r *http.Request) {
	host, _, ok := s.agentHost(w, r)
	if !ok {
		return
	}
	ins, err := s.instructionsFor(r.Context(), host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ins)
}

func (s *Server) instructionsFor(ctx context.Context, host *metal3v1.BareMetalHost) (*deployapi.Instructions, error) {
	req := Request(host)
	switch {
	case req == nil:
		return &deployapi.Instructions{Action: deployapi.ActionWait}, nil
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
// session than the one that claimed the request is refused with 409.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	host, _, ok := s.agentHost(w, r)
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
	req := Request(host)
	if req == nil || req.Generation != rep.Generation {
		http.Error(w, fmt.Sprintf("request %q is not the host's current request", rep.Generation), http.StatusConflict)
		return
	}
	prev := Report(host)
	if prev != nil && prev.Session != rep.Session {
		http.Error(w, fmt.Sprintf("request %s was claimed by another boot of the agent", rep.Generation), http.StatusConflict)
		return
	}
	if rep.Phase == deployapi.PhaseDone && req.Action == deployapi.ActionInspect && rep.Inventory == nil {
		http.Error(w, "invalid report: an inspect report carries the inventory", http.StatusBadRequest)
		return
	}
	if prev != nil && prev.Phase == rep.Phase && prev.Message == rep.Message && prev.RootDevice == rep.RootDevice {
		w.WriteHeader(http.StatusAccepted) // a repeated report: nothing new
		return
	}
	if prev != nil && prev.Phase != deployapi.PhaseRunning {
		http.Error(w, fmt.Sprintf("request %s already ended %s", rep.Generation, prev.Phase), http.StatusConflict)
		return
	}
	base := host.DeepCopy()
	host.Status.DeployAgent.Report = &metal3v1.DeployAgentReport{
		Generation: rep.Generation, Phase: rep.Phase, Message: rep.Message, RootDevice: rep.RootDevice,
		BytesWritten: rep.BytesWritten, Session: rep.Session, Time: metav1.NewTime(s.clock.Now().Truncate(time.Second)),
	}
	if req.Action == deployapi.ActionInspect {
		host.Status.DeployAgent.Report.HardwareDetails = HardwareDetails(rep.Inventory)
	}
	if err := s.client.Status().Patch(r.Context(), host, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// Our copy of the host was stale; the agent reports again.
			http.Error(w, "the host changed; report again", http.StatusServiceUnavailable)
			return
		}
		http.Error(w, "recording the report failed", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// serveByMAC answers a network-booting host: the deploy iPXE script when
// the engine wants its agent, 404 (boot the next device) otherwise.
func (s *Server) serveByMAC(w http.ResponseWriter, r *http.Request) {
	mac := strings.ToLower(r.PathValue("mac"))
	hosts := &metal3v1.BareMetalHostList{}
	if err := s.client.List(r.Context(), hosts); err != nil {
		http.Error(w, "listing hosts failed", http.StatusServiceUnavailable)
		return
	}
	var matches []*metal3v1.BareMetalHost
	for i := range hosts.Items {
		if h := &hosts.Items[i]; strings.EqualFold(h.Spec.BootMACAddress, mac) && Request(h) != nil {
			matches = append(matches, h)
		}
	}
	switch {
	case len(matches) > 1:
		// Booting one of them could write the wrong host's image.
		http.Error(w, fmt.Sprintf("%d hosts waiting for their deploy agent have boot MAC %s; fix spec.bootMACAddress", len(matches), mac), http.StatusConflict)
		return
	case len(matches) == 1:
		s.writeIPXE(w, HostID(matches[0]), s.clock.Now().Add(s.ttl))
		return
	}
	http.Error(w, "no network boot for "+mac, http.StatusNotFound)
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
