package equinix

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// hardware is a hardware reservation: a server of a plan in a metro,
// reserved for a project.
type hardware struct {
	id, project, plan, metro string
	device                   string // the device running on it, if any
	created                  time.Time
}

func (h *hardware) api() equinixapi.HardwareReservation {
	out := equinixapi.HardwareReservation{
		ID: h.id, Href: equinixapi.APIPrefix + "/hardware-reservations/" + h.id, ShortID: h.id[:8],
		Plan: findPlan(h.plan), Metro: findMetro(h.metro), Facility: facilityOf(h.metro),
		Project:   &equinixapi.Href{ID: h.project, Href: equinixapi.APIPrefix + "/projects/" + h.project},
		CreatedAt: h.created, Provisionable: h.device == "",
	}
	if h.device != "" {
		out.Device = &equinixapi.Href{ID: h.device, Href: equinixapi.APIPrefix + "/devices/" + h.device}
	}
	return out
}

// AddHardwareReservation reserves a server of plan in metro for the
// project, and returns its ID: a device created with that ID, or with
// "next-available" in that metro and plan, runs on it.
func (s *Server) AddHardwareReservation(projectID, metro, plan string) (string, error) {
	s.lock()
	defer s.unlock()
	if s.projects[projectID] == nil {
		return "", errors.New("no such project")
	}
	m, p := findMetro(metro), findPlan(plan)
	if m == nil || p == nil || metro == "any" {
		return "", fmt.Errorf("unknown metro %q or plan %q", metro, plan)
	}
	h := &hardware{id: newID(), project: projectID, plan: p.Slug, metro: m.Code, created: s.clock.Now().UTC()}
	s.hardware[h.id] = h
	return h.id, nil
}

// findHardware is the hardware reservation a create asks for (nil for
// none), or why there is none.
func (s *Server) findHardware(project, metro, plan, asked string) (*hardware, *httpError) {
	switch asked {
	case "":
		return nil, nil
	case equinixapi.HardwareReservationNextAvailable:
		var free []*hardware
		for _, h := range s.hardware {
			if h.project == project && h.metro == metro && h.plan == plan && h.device == "" {
				free = append(free, h)
			}
		}
		if len(free) == 0 {
			return nil, unprocessable(fmt.Sprintf("no available hardware reservations: the project has none free for %s in %s", plan, metro))
		}
		sortByCreation(free)
		return free[0], nil
	}
	h := s.hardware[asked]
	switch {
	case h == nil || h.project != project:
		return nil, unprocessable(fmt.Sprintf("hardware_reservation_id %q is not a hardware reservation of the project", asked))
	case h.device != "":
		return nil, unprocessable(fmt.Sprintf("hardware_reservation_id %q is in use by device %s", asked, h.device))
	case h.metro != metro || h.plan != plan:
		return nil, unprocessable(fmt.Sprintf("hardware_reservation_id %q is a %s in %s, not a %s in %s", asked, h.plan, h.metro, plan, metro))
	}
	return h, nil
}

func (s *Server) listHardware(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		pg, err := readPage(r, defaultPerPage)
		if err != nil {
			return nil, err
		}
		var list []*hardware
		for _, h := range s.hardware {
			if h.project == p.id {
				list = append(list, h)
			}
		}
		sortByCreation(list)
		from, to, meta := paginate(r, pg, len(list))
		out := equinixapi.HardwareReservationList{HardwareReservations: []equinixapi.HardwareReservation{}, Meta: meta}
		for _, h := range list[from:to] {
			out.HardwareReservations = append(out.HardwareReservations, h.api())
		}
		return out, nil
	})
}

func (s *Server) getHardware(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		h := s.hardware[r.PathValue("id")]
		if h == nil {
			return nil, notFound()
		}
		if _, err := s.projectFor(token(r), h.project); err != nil {
			return nil, forbidden()
		}
		return h.api(), nil
	})
}
