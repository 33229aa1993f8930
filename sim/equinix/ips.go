package equinix

import (
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// reservation is a block of addresses reserved for a project.
type reservation struct {
	id, project, typ, state string
	block                   netip.Prefix // invalid while pending
	quantity                int
	tags                    []string
	metro                   string
	details, comments       string
	customdata              map[string]any
	created                 time.Time
}

func (res *reservation) public() bool { return res.typ != equinixapi.IPTypePrivateIPv4 }

func (s *Server) poolOf(typ string) *pool {
	switch typ {
	case equinixapi.IPTypePrivateIPv4:
		return s.private
	case equinixapi.IPTypePublicIPv6:
		return s.ipv6
	default:
		return s.elastic
	}
}

// assignmentsOf are the reservation's assignments, oldest first.
func (s *Server) assignmentsOf(res *reservation) []*assignment {
	var out []*assignment
	for _, a := range s.assigned {
		if a.res == res {
			out = append(out, a)
		}
	}
	sortByCreation(out)
	return out
}

func (s *Server) apiReservation(res *reservation) equinixapi.IPReservation {
	out := equinixapi.IPReservation{
		ID: res.id, Href: equinixapi.APIPrefix + "/ips/" + res.id, Type: res.typ, State: res.state, Quantity: res.quantity,
		AddressFamily: 4, Public: res.public(), GlobalIP: res.typ == equinixapi.IPTypeGlobalIPv4, Enabled: res.state == equinixapi.IPStateCreated,
		Tags: append([]string{}, res.tags...), Details: res.details, Comments: res.comments, Customdata: maps.Clone(res.customdata),
		Project:     &equinixapi.Href{ID: res.project, Href: equinixapi.APIPrefix + "/projects/" + res.project},
		Assignments: []equinixapi.IPAssignment{}, CreatedAt: res.created,
	}
	if res.typ == equinixapi.IPTypePublicIPv6 {
		out.AddressFamily = 6
	}
	if res.metro != "" {
		out.Metro = findMetro(res.metro)
		out.Facility = facilityOf(res.metro)
	}
	if res.block.IsValid() {
		out.Address = res.block.Addr().String()
		out.Network = res.block.Addr().String()
		out.Netmask = netmask(res.block)
		out.Gateway = res.block.Addr().String()
		out.CIDR = res.block.Bits()
	}
	for _, a := range s.assignmentsOf(res) {
		out.Assignments = append(out.Assignments, a.api())
	}
	return out
}

var ipTypes = []string{equinixapi.IPTypePublicIPv4, equinixapi.IPTypePrivateIPv4, equinixapi.IPTypeGlobalIPv4, equinixapi.IPTypePublicIPv6}

func (s *Server) requestReservation(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.IPReservationRequest
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusCreated, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		var msgs []string
		if !slices.Contains(ipTypes, in.Type) {
			msgs = append(msgs, fmt.Sprintf("type must be one of %s", strings.Join(ipTypes, ", ")))
		}
		if q := in.Quantity; q < 1 || q > 256 || q&(q-1) != 0 {
			msgs = append(msgs, "quantity must be a power of two from 1 to 256")
		}
		metro := in.Metro
		switch {
		case in.Metro != "" && in.Facility != "":
			msgs = append(msgs, "metro and facility are exclusive: give one")
		case in.Metro != "":
			if m := findMetro(in.Metro); m == nil {
				msgs = append(msgs, fmt.Sprintf("metro %q is not a known metro", in.Metro))
			} else {
				metro = m.Code
			}
		case in.Facility != "":
			if f := findFacility(in.Facility); f == nil {
				msgs = append(msgs, fmt.Sprintf("facility %q is not a known facility", in.Facility))
			} else {
				metro = f.Metro.Code
			}
		case in.Type != equinixapi.IPTypeGlobalIPv4:
			msgs = append(msgs, "metro is required (or, deprecated, facility)")
		}
		if len(msgs) > 0 {
			return nil, unprocessable(msgs...)
		}
		res := &reservation{
			id: newID(), project: p.id, typ: in.Type, state: equinixapi.IPStateCreated, quantity: in.Quantity,
			tags: append([]string{}, in.Tags...), metro: metro, details: in.Details, comments: in.Comments,
			customdata: maps.Clone(in.Customdata), created: s.clock.Now().UTC(),
		}
		if in.Type == equinixapi.IPTypeGlobalIPv4 {
			res.metro = ""
		}
		if s.opts.IPQuota > 0 && (in.Type == equinixapi.IPTypePublicIPv4 || in.Type == equinixapi.IPTypeGlobalIPv4) {
			held := 0
			for _, other := range s.ips {
				if other.project == p.id && other.state == equinixapi.IPStateCreated &&
					(other.typ == equinixapi.IPTypePublicIPv4 || other.typ == equinixapi.IPTypeGlobalIPv4) {
					held += other.quantity
				}
			}
			if held+in.Quantity > s.opts.IPQuota {
				if in.FailOnApprovalRequired {
					return nil, unprocessable(fmt.Sprintf("the request needs approval: the project holds %d public IPv4 addresses and its quota is %d (fail_on_approval_required is set)", held, s.opts.IPQuota))
				}
				res.state = equinixapi.IPStatePending
			}
		}
		if res.state == equinixapi.IPStateCreated {
			block, aerr := s.poolOf(in.Type).allocate(in.Quantity)
			if aerr != nil {
				return nil, unprocessable("no addresses left for the request: " + aerr.Error())
			}
			res.block = block
		}
		s.ips[res.id] = res
		return s.apiReservation(res), nil
	})
}

// reservationFor is the reservation id for token (404 / 403 as devices).
func (s *Server) reservationFor(token, id string) (*reservation, *httpError) {
	res := s.ips[id]
	if res == nil {
		return nil, notFound()
	}
	if s.projects[res.project] == nil || s.projects[res.project].owner != token {
		return nil, forbidden()
	}
	return res, nil
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		pg, err := readPage(r, defaultIPPerPage)
		if err != nil {
			return nil, err
		}
		var types []string
		if v := r.URL.Query().Get("types"); v != "" {
			types = strings.Split(v, ",")
		}
		var list []*reservation
		for _, res := range s.ips {
			if res.project == p.id && (types == nil || slices.Contains(types, res.typ)) {
				list = append(list, res)
			}
		}
		sortByCreation(list)
		from, to, meta := paginate(r, pg, len(list))
		out := equinixapi.IPReservationList{IPAddresses: []equinixapi.IPReservation{}, Meta: meta}
		for _, res := range list[from:to] {
			out.IPAddresses = append(out.IPAddresses, s.apiReservation(res))
		}
		return out, nil
	})
}

// ipFor finds an /ips/{id}: a reservation, or an assignment.
func (s *Server) ipFor(token, id string) (*reservation, *assignment, *httpError) {
	if res := s.ips[id]; res != nil {
		res, err := s.reservationFor(token, id)
		return res, nil, err
	}
	a := s.assigned[id]
	if a == nil {
		return nil, nil, notFound()
	}
	if _, err := s.deviceFor(token, a.device); err != nil {
		return nil, nil, err
	}
	return nil, a, nil
}

func (s *Server) getIP(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		res, a, err := s.ipFor(token(r), r.PathValue("id"))
		switch {
		case err != nil:
			return nil, err
		case res != nil:
			return s.apiReservation(res), nil
		default:
			return a.api(), nil
		}
	})
}

func (s *Server) updateIP(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.IPReservationUpdateInput
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusOK, func() (any, *httpError) {
		res, _, err := s.ipFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, unprocessable("only a reservation can be updated, not an assignment")
		}
		if in.Tags != nil {
			res.tags = append([]string{}, (*in.Tags)...)
		}
		if in.Details != nil {
			res.details = *in.Details
		}
		if in.Customdata != nil {
			res.customdata = maps.Clone(*in.Customdata)
		}
		return s.apiReservation(res), nil
	})
}

func (s *Server) deleteIP(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusNoContent, func() (any, *httpError) {
		res, a, err := s.ipFor(token(r), r.PathValue("id"))
		switch {
		case err != nil:
			return nil, err
		case a != nil && a.res == nil:
			return nil, unprocessable("this is one of the device's own addresses: it goes when the device is deleted")
		case a != nil:
			s.unassignLocked(a)
			return nil, nil
		}
		if n := len(s.assignmentsOf(res)); n > 0 {
			return nil, unprocessable(fmt.Sprintf("the block has %d assignment(s): unassign them before releasing it", n))
		}
		if res.block.IsValid() {
			s.poolOf(res.typ).free(res.block)
		}
		delete(s.ips, res.id)
		return nil, nil
	})
}

func (s *Server) unassignLocked(a *assignment) {
	delete(s.assigned, a.id)
}

func (s *Server) listDeviceIPs(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		d, err := s.deviceFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		out := equinixapi.IPAssignmentList{IPAddresses: []equinixapi.IPAssignment{}}
		for _, a := range s.addresses(d) {
			out.IPAddresses = append(out.IPAddresses, a.api())
		}
		return out, nil
	})
}

func (s *Server) assignIP(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.IPAssignmentInput
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusCreated, func() (any, *httpError) {
		d, err := s.deviceFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if d.state == equinixapi.StateDeprovisioning {
			return nil, unprocessable("the device is deprovisioning")
		}
		prefix, perr := netip.ParsePrefix(in.Address)
		if perr != nil {
			addr, aerr := netip.ParseAddr(in.Address)
			if aerr != nil {
				return nil, unprocessable(fmt.Sprintf("address %q is neither an address nor a prefix", in.Address))
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		if prefix != prefix.Masked() {
			return nil, unprocessable(fmt.Sprintf("address %q: a prefix must be its network's first address", in.Address))
		}
		var res *reservation
		for _, x := range s.ips {
			if x.project == d.project && x.block.IsValid() && x.block.Contains(prefix.Addr()) && x.block.Bits() <= prefix.Bits() {
				res = x
				break
			}
		}
		if res == nil {
			return nil, unprocessable(fmt.Sprintf("address %q is not in a reservation of the device's project", in.Address))
		}
		for _, other := range s.assignmentsOf(res) {
			if other.addr.Overlaps(prefix) {
				return nil, unprocessable(fmt.Sprintf("address %q is already assigned to device %s", in.Address, other.device))
			}
		}
		a := &assignment{id: newID(), addr: prefix, parent: res.block, public: res.public(), device: d.id, res: res, created: s.clock.Now().UTC()}
		if res.typ != equinixapi.IPTypeGlobalIPv4 {
			a.gateway = res.block.Addr()
		}
		s.assigned[a.id] = a
		return a.api(), nil
	})
}
