package equinix

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
	"github.com/metalshift/metalshift/sim/fault"
)

type device struct {
	id, project           string
	hostname, description string
	state                 string
	// until is when the transitional state ends (zero in a stable state).
	until time.Time
	// fail says the provisioning under way ends failed.
	fail                 bool
	tags                 []string
	billing              string
	alwaysPXE            bool
	ipxe, userdata       string
	customdata           map[string]any
	locked               bool
	plan, os, metro, fac string
	hardwareReservation  string
	macs                 []string
	own                  []*assignment // private IPv4, public IPv4, public IPv6
	created, updated     time.Time
}

// assignment is an address of a device: one of its own (res nil), or one
// of a reservation's.
type assignment struct {
	id      string
	addr    netip.Prefix // the address, with the prefix length of its network
	gateway netip.Addr
	parent  netip.Prefix
	public  bool
	manage  bool
	device  string
	res     *reservation
	created time.Time
}

func (a *assignment) api() equinixapi.IPAssignment {
	network := a.addr.Masked()
	out := equinixapi.IPAssignment{
		ID: a.id, Href: equinixapi.APIPrefix + "/ips/" + a.id,
		Address: a.addr.Addr().String(), AddressFamily: family(a.addr.Addr()), Netmask: netmask(a.addr),
		Network: network.Addr().String(), CIDR: a.addr.Bits(), Public: a.public, Management: a.manage, Enabled: true,
		AssignedTo:  &equinixapi.Href{ID: a.device, Href: equinixapi.APIPrefix + "/devices/" + a.device},
		ParentBlock: equinixapi.ParentBlock{Network: a.parent.Addr().String(), Netmask: netmask(a.parent), CIDR: a.parent.Bits()},
		CreatedAt:   a.created,
	}
	if a.gateway.IsValid() {
		out.Gateway = a.gateway.String()
	}
	if a.res != nil {
		out.ParentBlock.Href = equinixapi.APIPrefix + "/ips/" + a.res.id
	}
	return out
}

func family(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

var billingCycles = []string{equinixapi.BillingHourly, equinixapi.BillingDaily, equinixapi.BillingMonthly, equinixapi.BillingYearly}

// deviceFor is the device id for token: 404 when there is none, 403 when
// the token does not own its project.
func (s *Server) deviceFor(token, id string) (*device, *httpError) {
	d := s.devices[id]
	if d == nil {
		return nil, notFound()
	}
	if s.projects[d.project] == nil || s.projects[d.project].owner != token {
		return nil, forbidden()
	}
	return d, nil
}

// addresses are every address of the device: its own, then those
// assigned from reservations, oldest first.
func (s *Server) addresses(d *device) []*assignment {
	out := slices.Clone(d.own)
	var elastic []*assignment
	for _, a := range s.assigned {
		if a.res != nil && a.device == d.id {
			elastic = append(elastic, a)
		}
	}
	sortByCreation(elastic)
	return append(out, elastic...)
}

func (s *Server) apiDevice(d *device) equinixapi.Device {
	out := equinixapi.Device{
		ID: d.id, ShortID: d.id[:8], Href: equinixapi.APIPrefix + "/devices/" + d.id, Hostname: d.hostname, Description: d.description,
		State: d.state, Tags: append([]string{}, d.tags...), BillingCycle: d.billing, AlwaysPXE: d.alwaysPXE, IPXEScriptURL: d.ipxe,
		Userdata: d.userdata, Customdata: maps.Clone(d.customdata), Locked: d.locked,
		Plan: findPlan(d.plan), OperatingSystem: findOS(d.os), Metro: findMetro(d.metro), Facility: findFacility(d.fac),
		Project:     &equinixapi.Href{ID: d.project, Href: equinixapi.APIPrefix + "/projects/" + d.project},
		IPAddresses: []equinixapi.IPAssignment{}, CreatedAt: d.created, UpdatedAt: d.updated,
	}
	for _, a := range s.addresses(d) {
		out.IPAddresses = append(out.IPAddresses, a.api())
	}
	bond := equinixapi.NetworkPort{ID: uuidFrom(d.id, "bond0"), Name: "bond0", Type: equinixapi.PortTypeBond, Data: equinixapi.NetworkPortData{Bonded: true}}
	out.NetworkPorts = append(out.NetworkPorts, bond)
	for i, mac := range d.macs {
		name := "eth" + strconv.Itoa(i)
		out.NetworkPorts = append(out.NetworkPorts, equinixapi.NetworkPort{
			ID: uuidFrom(d.id, name), Name: name, Type: equinixapi.PortTypeNIC,
			Data: equinixapi.NetworkPortData{MAC: mac, Bonded: true}, Bond: &equinixapi.NetworkPortBond{ID: bond.ID, Name: "bond0"},
		})
	}
	if d.hardwareReservation != "" {
		out.HardwareReservation = &equinixapi.Href{ID: d.hardwareReservation, Href: equinixapi.APIPrefix + "/hardware-reservations/" + d.hardwareReservation}
	}
	switch d.state {
	case equinixapi.StateActive, equinixapi.StateInactive, equinixapi.StatePoweringOn, equinixapi.StatePoweringOff:
		out.ProvisioningPercentage = 100
	}
	return out
}

// uuidFrom is a stable UUID for a part of a device.
func uuidFrom(id, part string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(id+"/"+part)).String()
}

// validateCreate checks a create's fields, and says every field at fault.
func (s *Server) validateCreate(in *equinixapi.DeviceCreateInput) []string {
	var msgs []string
	if in.Plan == "" {
		msgs = append(msgs, "plan is required")
	} else if findPlan(in.Plan) == nil {
		msgs = append(msgs, fmt.Sprintf("plan %q is not a known plan", in.Plan))
	}
	if in.OperatingSystem == "" {
		msgs = append(msgs, "operating_system is required")
	} else if findOS(in.OperatingSystem) == nil {
		msgs = append(msgs, fmt.Sprintf("operating_system %q is not a known operating system", in.OperatingSystem))
	}
	switch {
	case in.Metro != "" && len(in.Facility) > 0:
		msgs = append(msgs, "metro and facility are exclusive: give one")
	case in.Metro == "" && len(in.Facility) == 0:
		msgs = append(msgs, "metro is required (or, deprecated, facility)")
	case in.Metro != "" && findMetro(in.Metro) == nil:
		msgs = append(msgs, fmt.Sprintf("metro %q is not a known metro", in.Metro))
	case len(in.Facility) > 0:
		for _, f := range in.Facility {
			if findFacility(f) == nil {
				msgs = append(msgs, fmt.Sprintf("facility %q is not a known facility", f))
			}
		}
	}
	if in.BillingCycle != "" && !slices.Contains(billingCycles, in.BillingCycle) {
		msgs = append(msgs, fmt.Sprintf("billing_cycle must be one of %s", strings.Join(billingCycles, ", ")))
	}
	msgs = append(msgs, s.validateBoot(in.OperatingSystem, in.IPXEScriptURL, in.Userdata)...)
	if r := in.HardwareReservationID; r != "" && r != equinixapi.HardwareReservationNextAvailable {
		if _, err := uuid.Parse(r); err != nil {
			msgs = append(msgs, fmt.Sprintf("hardware_reservation_id %q is neither a UUID nor %q", r, equinixapi.HardwareReservationNextAvailable))
		}
	}
	if len(in.Hostname) > 253 || strings.ContainsAny(in.Hostname, " /_") {
		msgs = append(msgs, fmt.Sprintf("hostname %q is not a valid hostname", in.Hostname))
	}
	return msgs
}

// validateBoot checks how a device boots: custom_ipxe needs an iPXE
// script, by URL or as userdata; an iPXE URL needs custom_ipxe.
func (s *Server) validateBoot(os, ipxeURL, userdata string) []string {
	var msgs []string
	if os == equinixapi.OSCustomIPXE && ipxeURL == "" && !strings.HasPrefix(userdata, equinixapi.IPXEUserdataPrefix) {
		msgs = append(msgs, "ipxe_script_url is required when operating_system is custom_ipxe, unless userdata is an iPXE script (starts with #!ipxe)")
	}
	if ipxeURL != "" {
		if os != "" && os != equinixapi.OSCustomIPXE {
			msgs = append(msgs, "ipxe_script_url is only for operating_system custom_ipxe")
		}
		if u, err := url.Parse(ipxeURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			msgs = append(msgs, fmt.Sprintf("ipxe_script_url %q is not an http or https URL", ipxeURL))
		}
	}
	if len(userdata) > s.opts.MaxUserdata {
		msgs = append(msgs, fmt.Sprintf("userdata is %d bytes, over the limit of %d", len(userdata), s.opts.MaxUserdata))
	}
	return msgs
}

func (s *Server) createDevice(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.DeviceCreateInput
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusCreated, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if msgs := s.validateCreate(&in); len(msgs) > 0 {
			return nil, unprocessable(msgs...)
		}
		d, err := s.createDeviceLocked(p, &in)
		if err != nil {
			return nil, err
		}
		return s.apiDevice(d), nil
	})
}

func (s *Server) createDeviceLocked(p *project, in *equinixapi.DeviceCreateInput) (*device, *httpError) {
	now := s.clock.Now().UTC()
	id := newID()
	hostname := in.Hostname
	if hostname == "" {
		hostname = strings.ReplaceAll(in.Plan, ".", "-") + "-" + id[:8]
	}
	metro, fac := in.Metro, ""
	if metro != "" {
		metro = findMetro(metro).Code
		fac = facilityOf(metro).Code
	} else {
		f := findFacility(in.Facility[0])
		metro, fac = f.Metro.Code, f.Code
	}
	if s.opts.Faults.For(hostname).Decide(fault.EquinixNoHardware).Fired() {
		return nil, unprocessable(fmt.Sprintf("no available hardware: the %s metro has no %s server that can be provisioned", metro, in.Plan))
	}
	hw, herr := s.findHardware(p.id, metro, findPlan(in.Plan).Slug, in.HardwareReservationID)
	if herr != nil {
		return nil, herr
	}
	d := &device{
		id: id, project: p.id, hostname: hostname, description: in.Description, state: equinixapi.StateQueued,
		until: now.Add(s.opts.Timings.Queued), tags: slices.Clone(in.Tags), billing: in.BillingCycle, alwaysPXE: in.AlwaysPXE,
		ipxe: in.IPXEScriptURL, userdata: in.Userdata, customdata: maps.Clone(in.Customdata), locked: in.Locked,
		plan: findPlan(in.Plan).Slug, os: findOS(in.OperatingSystem).Slug, metro: metro, fac: fac,
		created: now, updated: now,
	}
	if d.tags == nil {
		d.tags = []string{}
	}
	if d.billing == "" {
		d.billing = equinixapi.BillingHourly
	}
	for _, b := range []struct {
		pool           *pool
		n              int
		public, manage bool
	}{{s.private, 2, false, true}, {s.public, 2, true, true}, {s.ipv6, 2, true, true}} {
		block, err := b.pool.allocate(b.n)
		if err != nil {
			s.freeOwn(d)
			return nil, unprocessable("no available hardware: no addresses left for a device")
		}
		d.own = append(d.own, &assignment{
			id: newID(), addr: netip.PrefixFrom(addOffset(block.Addr(), 1), block.Bits()), gateway: block.Addr(),
			parent: b.pool.prefix, public: b.public, manage: b.manage, device: id, created: now,
		})
	}
	for _, a := range d.own {
		s.assigned[a.id] = a
	}
	for range 2 {
		s.macSerial++
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], s.macSerial)
		d.macs = append(d.macs, fmt.Sprintf("02:4d:%02x:%02x:%02x:%02x", n[0], n[1], n[2], n[3]))
	}
	if hw != nil {
		hw.device, d.hardwareReservation = id, hw.id
	}
	s.devices[id] = d
	return d, nil
}

// freeOwn gives a device's own addresses back.
func (s *Server) freeOwn(d *device) {
	for _, a := range d.own {
		block := a.addr.Masked()
		for _, p := range []*pool{s.private, s.public, s.ipv6} {
			if p.prefix.Contains(block.Addr()) {
				p.free(block)
			}
		}
		delete(s.assigned, a.id)
	}
	d.own = nil
}

func (s *Server) getDevice(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		d, err := s.deviceFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if s.opts.ForbidFailed && d.state == equinixapi.StateFailed {
			return nil, forbidden()
		}
		return s.apiDevice(d), nil
	})
}

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		pg, err := readPage(r, defaultPerPage)
		if err != nil {
			return nil, err
		}
		q := r.URL.Query()
		var list []*device
		for _, d := range s.devices {
			if d.project != p.id {
				continue
			}
			if tag := q.Get("tag"); tag != "" && !slices.Contains(d.tags, tag) {
				continue
			}
			if h := q.Get("hostname"); h != "" && d.hostname != h {
				continue
			}
			if m := q.Get("metro"); m != "" && d.metro != m {
				continue
			}
			list = append(list, d)
		}
		sortByCreation(list)
		from, to, meta := paginate(r, pg, len(list))
		out := equinixapi.DeviceList{Devices: []equinixapi.Device{}, Meta: meta}
		for _, d := range list[from:to] {
			out.Devices = append(out.Devices, s.apiDevice(d))
		}
		return out, nil
	})
}

func (s *Server) updateDevice(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.DeviceUpdateInput
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusOK, func() (any, *httpError) {
		d, err := s.deviceFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		ipxe, userdata := d.ipxe, d.userdata
		if in.IPXEScriptURL != nil {
			ipxe = *in.IPXEScriptURL
		}
		if in.Userdata != nil {
			userdata = *in.Userdata
		}
		msgs := s.validateBoot(d.os, ipxe, userdata)
		if in.BillingCycle != nil && !slices.Contains(billingCycles, *in.BillingCycle) {
			msgs = append(msgs, fmt.Sprintf("billing_cycle must be one of %s", strings.Join(billingCycles, ", ")))
		}
		if in.Hostname != nil && (*in.Hostname == "" || len(*in.Hostname) > 253 || strings.ContainsAny(*in.Hostname, " /_")) {
			msgs = append(msgs, fmt.Sprintf("hostname %q is not a valid hostname", *in.Hostname))
		}
		if len(msgs) > 0 {
			return nil, unprocessable(msgs...)
		}
		d.ipxe, d.userdata = ipxe, userdata
		if in.Hostname != nil {
			d.hostname = *in.Hostname
		}
		if in.Description != nil {
			d.description = *in.Description
		}
		if in.BillingCycle != nil {
			d.billing = *in.BillingCycle
		}
		if in.AlwaysPXE != nil {
			d.alwaysPXE = *in.AlwaysPXE
		}
		if in.Locked != nil {
			d.locked = *in.Locked
		}
		if in.Tags != nil {
			d.tags = append([]string{}, (*in.Tags)...)
		}
		if in.Customdata != nil {
			d.customdata = maps.Clone(*in.Customdata)
		}
		d.updated = s.clock.Now().UTC()
		return s.apiDevice(d), nil
	})
}

func (s *Server) deleteDevice(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusNoContent, func() (any, *httpError) {
		d, err := s.deviceFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		if v := r.URL.Query().Get("force_delete"); v != "" {
			// Accepted as the API does; there are no volumes to detach.
			if _, perr := strconv.ParseBool(v); perr != nil {
				return nil, unprocessable("force_delete must be true or false")
			}
		}
		if d.locked {
			return nil, unprocessable("the device is locked: unlock it before deleting it")
		}
		if d.state == equinixapi.StateDeprovisioning {
			return nil, nil
		}
		now := s.clock.Now().UTC()
		// Addresses assigned from reservations go back to their blocks at
		// once; the device's own go with it.
		for _, a := range s.addresses(d) {
			if a.res != nil {
				s.unassignLocked(a)
			}
		}
		d.state, d.until, d.updated, d.fail = equinixapi.StateDeprovisioning, now.Add(s.opts.Timings.Deprovisioning), now, false
		s.tell(func(m Machines) { m.Deprovision(d.id) })
		return nil, nil
	})
}

func (s *Server) deviceAction(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.DeviceActionInput
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusAccepted, func() (any, *httpError) {
		d, err := s.deviceFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		now := s.clock.Now().UTC()
		refuse := func() *httpError {
			return unprocessable(fmt.Sprintf("the device is %s: %s is not possible now", d.state, in.Type))
		}
		switch in.Type {
		case equinixapi.ActionPowerOff:
			if d.state != equinixapi.StateActive {
				return nil, refuse()
			}
			d.state, d.until = equinixapi.StatePoweringOff, now.Add(s.opts.Timings.Power)
		case equinixapi.ActionPowerOn:
			if d.state != equinixapi.StateInactive {
				return nil, refuse()
			}
			d.state, d.until = equinixapi.StatePoweringOn, now.Add(s.opts.Timings.Power)
		case equinixapi.ActionReboot:
			if d.state != equinixapi.StateActive {
				return nil, refuse()
			}
		case equinixapi.ActionReinstall:
			if d.state != equinixapi.StateActive && d.state != equinixapi.StateInactive && d.state != equinixapi.StateFailed {
				return nil, refuse()
			}
			os, ipxe := d.os, d.ipxe
			if in.OperatingSystem != "" {
				if findOS(in.OperatingSystem) == nil {
					return nil, unprocessable(fmt.Sprintf("operating_system %q is not a known operating system", in.OperatingSystem))
				}
				os = findOS(in.OperatingSystem).Slug
			}
			if in.IPXEScriptURL != "" {
				ipxe = in.IPXEScriptURL
			}
			if msgs := s.validateBoot(os, ipxe, d.userdata); len(msgs) > 0 {
				return nil, unprocessable(msgs...)
			}
			d.os, d.ipxe, d.updated = os, ipxe, now
			s.startProvisioning(d, now, true)
			return nil, nil
		case "rescue":
			return nil, unprocessable("type rescue is not emulated")
		default:
			return nil, unprocessable(fmt.Sprintf("type %q must be one of power_on, power_off, reboot, reinstall", in.Type))
		}
		d.updated = now
		id, action := d.id, in.Type
		s.tell(func(m Machines) { m.Power(id, action) })
		return nil, nil
	})
}

// tell queues a call of Options.Machines for when the lock is released.
func (s *Server) tell(f func(Machines)) {
	if s.opts.Machines == nil {
		return
	}
	m := s.opts.Machines
	s.pending = append(s.pending, func() { f(m) })
}

// startProvisioning starts a provisioning (or reinstall) at the time at.
func (s *Server) startProvisioning(d *device, at time.Time, reinstall bool) {
	d.state = equinixapi.StateProvisioning
	if reinstall {
		d.state = equinixapi.StateReinstalling
	}
	dur := s.opts.Timings.Provisioning
	dec := s.opts.Faults.For(d.hostname)
	if f := dec.Decide(fault.EquinixSlowProvision); f.Fired() {
		dur += f.Duration
	}
	d.fail = dec.Decide(fault.EquinixFailed).Fired()
	d.until, d.updated = at.Add(dur), at
	if d.fail {
		return // it never reaches a machine
	}
	m := Machine{ID: d.id, Hostname: d.hostname, OperatingSystem: d.os, MACs: slices.Clone(d.macs),
		IPXEScriptURL: d.ipxe, Userdata: d.userdata, AlwaysPXE: d.alwaysPXE, Reinstall: reinstall}
	for _, a := range d.own {
		m.Addresses = append(m.Addresses, a.addr)
	}
	s.tell(func(ms Machines) { ms.Provision(m) })
}

// advanceLocked carries out every transition due by now, in the order of
// their times, each at its own time.
func (s *Server) advanceLocked(now time.Time) {
	for {
		var next *device
		for _, d := range s.devices {
			if d.until.IsZero() || d.until.After(now) {
				continue
			}
			if next == nil || d.until.Before(next.until) || (d.until.Equal(next.until) && d.id < next.id) {
				next = d
			}
		}
		if next == nil {
			return
		}
		at := next.until
		next.until, next.updated = time.Time{}, at
		switch next.state {
		case equinixapi.StateQueued:
			s.startProvisioning(next, at, false)
		case equinixapi.StateProvisioning, equinixapi.StateReinstalling:
			next.state = equinixapi.StateActive
			if next.fail {
				next.state = equinixapi.StateFailed
			}
		case equinixapi.StatePoweringOff:
			next.state = equinixapi.StateInactive
		case equinixapi.StatePoweringOn:
			next.state = equinixapi.StateActive
		case equinixapi.StateDeprovisioning:
			s.freeOwn(next)
			if h := s.hardware[next.hardwareReservation]; h != nil && h.device == next.id {
				h.device = ""
			}
			delete(s.devices, next.id)
		}
	}
}
