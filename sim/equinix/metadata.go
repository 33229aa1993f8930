package equinix

import (
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// MetadataHandler serves the metadata service: GET /metadata (JSON) and
// GET /userdata (as given) to the device whose IPv4 address (its own
// private or public one, or one assigned from a reservation) the call
// comes from. Devices queued, failed or deprovisioning have none; any
// other caller gets 404.
func (s *Server) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || (r.URL.Path != equinixapi.MetadataPath && r.URL.Path != equinixapi.UserdataPath) {
			writeJSON(w, http.StatusNotFound, equinixapi.ErrorResponse{Error: "Not found"})
			return
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		addr, perr := netip.ParseAddr(host)
		if err != nil || perr != nil {
			writeJSON(w, http.StatusNotFound, equinixapi.ErrorResponse{Error: "Not found"})
			return
		}
		addr = addr.Unmap()
		s.lock()
		var md *equinixapi.Metadata
		var userdata string
		if d := s.deviceAt(addr); d != nil {
			m := s.metadata(d)
			md, userdata = &m, d.userdata
		}
		s.unlock()
		if md == nil {
			writeJSON(w, http.StatusNotFound, equinixapi.ErrorResponse{Error: "no device has the address " + addr.String()})
			return
		}
		if r.URL.Path == equinixapi.UserdataPath {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(userdata))
			return
		}
		writeJSON(w, http.StatusOK, md)
	})
}

// deviceAt is the device with the address, when it is served metadata.
func (s *Server) deviceAt(addr netip.Addr) *device {
	for _, a := range s.assigned {
		if a.addr.Addr() != addr {
			continue
		}
		d := s.devices[a.device]
		if d == nil {
			return nil
		}
		switch d.state {
		case equinixapi.StateQueued, equinixapi.StateFailed, equinixapi.StateDeprovisioning:
			return nil
		}
		return d
	}
	return nil
}

func (s *Server) metadata(d *device) equinixapi.Metadata {
	md := equinixapi.Metadata{
		ID: d.id, Hostname: d.hostname, IQN: "iqn.2026-01.net.metalshift:device." + d.id[:8], Plan: d.plan, Class: d.plan,
		Metro: d.metro, Facility: d.fac, State: d.state, Tags: append([]string{}, d.tags...),
		SSHKeys: append([]string{}, s.opts.SSHKeys...), Customdata: maps.Clone(d.customdata),
		PrivateSubnets: []string{s.opts.PrivateBlock.String()}, Volumes: []json.RawMessage{},
		Network: equinixapi.MetadataNetwork{Bonding: equinixapi.MetadataBonding{Mode: equinixapi.BondModeLACP}},
	}
	if md.Customdata == nil {
		md.Customdata = map[string]any{}
	}
	if os := findOS(d.os); os != nil {
		md.OperatingSystem = equinixapi.MetadataOS{Slug: os.Slug, Distro: os.Distro, Version: os.Version}
	}
	if s.apiURL != "" {
		md.APIURL = s.apiURL
	}
	for i, mac := range d.macs {
		md.Network.Interfaces = append(md.Network.Interfaces, equinixapi.MetadataInterface{Name: "eth" + strconv.Itoa(i), MAC: mac, Bond: "bond0"})
	}
	for _, a := range s.addresses(d) {
		x := a.api()
		pb := x.ParentBlock
		md.Network.Addresses = append(md.Network.Addresses, equinixapi.MetadataAddress{
			ID: x.ID, AddressFamily: x.AddressFamily, Public: x.Public, Management: x.Management, Enabled: true,
			Address: x.Address, Netmask: x.Netmask, Gateway: x.Gateway, Network: x.Network, CIDR: x.CIDR, ParentBlock: &pb,
		})
	}
	return md
}
