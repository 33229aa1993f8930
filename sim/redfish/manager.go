package redfish

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

func (s *Server) manager(w http.ResponseWriter, r *http.Request, id string, rest []string) {
	m := s.Machine(id)
	if m == nil {
		notFound(w)
		return
	}
	base := "/redfish/v1/Managers/BMC-" + id
	switch {
	case len(rest) == 0:
		writeJSON(w, http.StatusOK, map[string]any{
			"@odata.id": base, "@odata.type": "#Manager.v1_10_0.Manager", "Id": "BMC-" + id, "Name": "Manager of " + id,
			"ManagerType": "BMC", "FirmwareVersion": "1.0.0", "Status": map[string]any{"State": "Enabled", "Health": "OK"},
			"VirtualMedia": odataID(base + "/VirtualMedia"),
			"Links":        map[string]any{"ManagerForServers": []any{odataID("/redfish/v1/Systems/" + id)}},
		})
	case len(rest) == 1 && rest[0] == "VirtualMedia":
		writeJSON(w, http.StatusOK, collectionBody(base+"/VirtualMedia", "#VirtualMediaCollection.VirtualMediaCollection", "Virtual Media", []any{odataID(base + "/VirtualMedia/Cd")}))
	case len(rest) == 2 && rest[0] == "VirtualMedia" && rest[1] == "Cd":
		writeJSON(w, http.StatusOK, mediaBody(m, base+"/VirtualMedia/Cd"))
	case len(rest) == 4 && rest[0] == "VirtualMedia" && rest[1] == "Cd" && rest[2] == "Actions" && r.Method == http.MethodPost:
		s.mediaAction(w, r, m, rest[3])
	default:
		notFound(w)
	}
}

func mediaBody(m *machine.Machine, path string) map[string]any {
	img := m.Media()
	body := map[string]any{
		"@odata.id": path, "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia", "Id": "Cd", "Name": "Virtual CD",
		"MediaTypes": []string{"CD", "DVD"}, "Inserted": img != "", "WriteProtected": true,
		"ConnectedVia": "URI", "TransferProtocolType": "HTTP",
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": path + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": path + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	if img != "" {
		body["Image"] = img
		body["ImageName"] = img
	} else {
		body["Image"] = nil
		body["ConnectedVia"] = "NotConnected"
	}
	return body
}

func (s *Server) mediaAction(w http.ResponseWriter, r *http.Request, m *machine.Machine, action string) {
	switch action {
	case "VirtualMedia.InsertMedia":
		var body struct {
			Image    string
			Inserted *bool
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Image == "" {
			writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "InsertMedia requires Image.")
			return
		}
		if s.decider("/redfish/v1/Managers/BMC-" + m.ID).Decide(fault.RedfishMedia).Fired() {
			writeError(w, http.StatusInternalServerError, "Base.1.8.GeneralError", "Inserting media failed: injected fault.")
			return
		}
		if m.Media() != "" {
			writeError(w, http.StatusConflict, "Base.1.8.ResourceInUse", "Media is already inserted; eject it first.")
			return
		}
		if err := m.InsertMedia(body.Image); err != nil {
			writeError(w, http.StatusInternalServerError, "Base.1.8.GeneralError", "Inserting media failed: "+err.Error())
			return
		}
	case "VirtualMedia.EjectMedia":
		if _, err := io.Copy(io.Discard, r.Body); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "Unreadable body.")
			return
		}
		m.EjectMedia()
	default:
		notFound(w)
		return
	}
	s.bump(m.ID)
	w.WriteHeader(http.StatusNoContent)
}
