package equinix

import (
	"net/http"
	"time"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

type project struct {
	id, name, owner string
	created         time.Time
}

func (p *project) api() equinixapi.Project {
	return equinixapi.Project{ID: p.id, Href: equinixapi.APIPrefix + "/projects/" + p.id, Name: p.name, CreatedAt: p.created, UpdatedAt: p.created}
}

func (s *Server) createProjectLocked(owner, name string) *project {
	p := &project{id: newID(), name: name, owner: owner, created: s.clock.Now().UTC()}
	s.projects[p.id] = p
	return p
}

// projectFor is the project id for token: 404 when there is none, 403
// when the token does not own it.
func (s *Server) projectFor(token, id string) (*project, *httpError) {
	p := s.projects[id]
	if p == nil {
		return nil, notFound()
	}
	if p.owner != token {
		return nil, forbidden()
	}
	return p, nil
}

func token(r *http.Request) string { return r.Header.Get(equinixapi.AuthHeader) }

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		pg, err := readPage(r, defaultPerPage)
		if err != nil {
			return nil, err
		}
		var mine []*project
		for _, p := range s.projects {
			if p.owner == token(r) {
				mine = append(mine, p)
			}
		}
		sortByCreation(mine)
		from, to, meta := paginate(r, pg, len(mine))
		out := equinixapi.ProjectList{Projects: []equinixapi.Project{}, Meta: meta}
		for _, p := range mine[from:to] {
			out.Projects = append(out.Projects, p.api())
		}
		return out, nil
	})
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) {
	var in equinixapi.ProjectCreateInput
	if err := decode(r, &in); err != nil {
		answer(w, 0, nil, err)
		return
	}
	s.do(w, http.StatusCreated, func() (any, *httpError) {
		if n := len(in.Name); n < 1 || n > 80 {
			return nil, unprocessable("name must be 1 to 80 characters long")
		}
		return s.createProjectLocked(token(r), in.Name).api(), nil
	})
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusOK, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return p.api(), nil
	})
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) {
	s.do(w, http.StatusNoContent, func() (any, *httpError) {
		p, err := s.projectFor(token(r), r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		for _, d := range s.devices {
			if d.project == p.id {
				return nil, unprocessable("the project still has devices: delete them first")
			}
		}
		for _, res := range s.ips {
			if res.project == p.id {
				return nil, unprocessable("the project still has IP reservations: release them first")
			}
		}
		delete(s.projects, p.id)
		return nil, nil
	})
}
