package equinix

import (
	"slices"
	"strings"
)

// Ledger is everything that exists and would cost money on a real
// account: devices, IP reservations with their assignments, and the tags
// on them. After a teardown it is empty.
type Ledger struct {
	Devices        []LedgerDevice      `json:"devices"`
	IPReservations []LedgerReservation `json:"ip_reservations"`
	// Tags are every tag of a device or a reservation, sorted, once each.
	Tags []string `json:"tags"`
}

// LedgerDevice is a device of the ledger.
type LedgerDevice struct {
	ID       string   `json:"id"`
	Project  string   `json:"project"`
	Hostname string   `json:"hostname"`
	State    string   `json:"state"`
	Tags     []string `json:"tags"`
	// Addresses are the device's addresses, its own and assigned ones.
	Addresses []string `json:"addresses"`
}

// LedgerReservation is an IP reservation of the ledger.
type LedgerReservation struct {
	ID      string `json:"id"`
	Project string `json:"project"`
	Type    string `json:"type"`
	State   string `json:"state"`
	// Block is the reserved block ("" while pending).
	Block       string             `json:"block"`
	Tags        []string           `json:"tags"`
	Assignments []LedgerAssignment `json:"assignments"`
}

// LedgerAssignment is an address of a reservation assigned to a device.
type LedgerAssignment struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Device  string `json:"device"`
}

// Empty says whether nothing is left.
func (l Ledger) Empty() bool { return len(l.Devices) == 0 && len(l.IPReservations) == 0 }

// Ledger lists every device and IP reservation that exists, devices
// being deprovisioned included.
func (s *Server) Ledger() Ledger {
	s.lock()
	defer s.unlock()
	l := Ledger{Devices: []LedgerDevice{}, IPReservations: []LedgerReservation{}, Tags: []string{}}
	tags := map[string]bool{}
	for _, d := range s.devices {
		ld := LedgerDevice{ID: d.id, Project: d.project, Hostname: d.hostname, State: d.state, Tags: slices.Clone(d.tags)}
		for _, a := range s.addresses(d) {
			ld.Addresses = append(ld.Addresses, a.addr.Addr().String())
		}
		for _, t := range d.tags {
			tags[t] = true
		}
		l.Devices = append(l.Devices, ld)
	}
	for _, res := range s.ips {
		lr := LedgerReservation{ID: res.id, Project: res.project, Type: res.typ, State: res.state, Tags: slices.Clone(res.tags), Assignments: []LedgerAssignment{}}
		if res.block.IsValid() {
			lr.Block = res.block.String()
		}
		for _, a := range s.assignmentsOf(res) {
			lr.Assignments = append(lr.Assignments, LedgerAssignment{ID: a.id, Address: a.addr.String(), Device: a.device})
		}
		for _, t := range res.tags {
			tags[t] = true
		}
		l.IPReservations = append(l.IPReservations, lr)
	}
	for t := range tags {
		l.Tags = append(l.Tags, t)
	}
	slices.Sort(l.Tags)
	slices.SortFunc(l.Devices, func(a, b LedgerDevice) int { return strings.Compare(a.Hostname+a.ID, b.Hostname+b.ID) })
	slices.SortFunc(l.IPReservations, func(a, b LedgerReservation) int { return strings.Compare(a.ID, b.ID) })
	return l
}
