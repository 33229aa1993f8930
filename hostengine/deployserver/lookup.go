package deployserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deployapi "github.com/metalshift/metalshift/api/deploy/v1"
	metal3v1 "github.com/metalshift/metalshift/api/metal3/v1alpha1"
	"github.com/metalshift/metalshift/internal/shard"
)

// ImageScope is the scope of a lookup credential for an image at rawURL:
// the URL's path.
func ImageScope(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Path
}

// lookup answers an agent booted from an image that is not per-host: the
// boot configuration, with the ticket of its current request, of the one
// host that has one of its MAC addresses, whose PreprovisioningImage serves
// the image the credential is for, and which the engine booted for that
// request and whose agent has not got the request's token yet.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	var req deployapi.LookupRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		http.Error(w, "invalid lookup: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := deployapi.VerifyLookupToken(s.key, req.Scope, req.Token, s.clock.Now()); err != nil {
		http.Error(w, "invalid or expired lookup credential: the image's URL has expired, boot a new one", http.StatusUnauthorized)
		return
	}
	hosts, err := s.hostsServing(r.Context(), req)
	if err != nil {
		http.Error(w, "looking the host up failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	switch len(hosts) {
	case 0:
		http.Error(w, fmt.Sprintf("no BareMetalHost with MAC address %s boots this image: it is booted by the host engine for a host whose PreprovisioningImage serves it, not by hand",
			strings.Join(req.MACs, ", ")), http.StatusNotFound)
		return
	case 1:
	default:
		http.Error(w, fmt.Sprintf("%d BareMetalHosts with these MAC addresses boot this image; fix their spec.bootMACAddress", len(hosts)), http.StatusConflict)
		return
	}
	// Decided on the API's copy: the engine may have just started the
	// boot, or the agent just got its token.
	host, err := s.apiHost(r.Context(), HostID(hosts[0]))
	if err != nil {
		http.Error(w, "looking the host up failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	switch {
	case host == nil || host.DeployAgentRequest() == nil || !awaitingAgent(host) && host.DeployAgentToken() == nil:
		http.Error(w, fmt.Sprintf("no BareMetalHost with MAC address %s boots this image now: it is booted by the host engine for a host whose PreprovisioningImage serves it, not by hand",
			strings.Join(req.MACs, ", ")), http.StatusNotFound)
		return
	case !awaitingAgent(host):
		http.Error(w, "the deploy agent of this host's current request has its token already", http.StatusConflict)
		return
	}
	cfg, err := s.hostBootConfig(r.Context(), host, generation(host), s.clock.Now().Add(s.ttl))
	if err != nil {
		http.Error(w, "the host's boot configuration: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(cfg)
}

// hostsServing are the hosts with one of req's MACs (boot MAC, or a NIC of
// their hardware details) whose PreprovisioningImage serves req's scope.
func (s *Server) hostsServing(ctx context.Context, req deployapi.LookupRequest) ([]*metal3v1.BareMetalHost, error) {
	hosts := &metal3v1.BareMetalHostList{}
	if err := s.client.List(ctx, hosts, shard.ListOptions(s.shard)...); err != nil {
		return nil, err
	}
	var out []*metal3v1.BareMetalHost
	for i := range hosts.Items {
		h := &hosts.Items[i]
		if !hasMAC(h, req.MACs) {
			continue
		}
		ppi := &metal3v1.PreprovisioningImage{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Name}, ppi); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			continue
		}
		if u := ppi.ReadyISOURL(); u != "" && ImageScope(u) == req.Scope {
			out = append(out, h)
		}
	}
	return out, nil
}

func hasMAC(h *metal3v1.BareMetalHost, macs []string) bool {
	for _, m := range macs {
		if m == "" {
			continue
		}
		if strings.EqualFold(h.Spec.BootMACAddress, m) {
			return true
		}
		if hw := h.Status.HardwareDetails; hw != nil {
			for _, n := range hw.NIC {
				if strings.EqualFold(n.MAC, m) {
					return true
				}
			}
		}
	}
	return false
}
