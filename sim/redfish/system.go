package redfish

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/metalshift/metalshift/sim/fault"
	"github.com/metalshift/metalshift/sim/machine"
)

var resetTypes = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "ForceOn", "Nmi"}

func (s *Server) system(w http.ResponseWriter, r *http.Request, id string, rest []string) {
	m := s.Machine(id)
	if m == nil {
		notFound(w)
		return
	}
	base := "/redfish/v1/Systems/" + id
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		w.Header().Set("ETag", s.etag(id))
		writeJSON(w, http.StatusOK, systemBody(m, base))
	case len(rest) == 0 && r.Method == http.MethodPatch:
		s.patchSystem(w, r, m)
	case len(rest) == 2 && rest[0] == "Actions" && rest[1] == "ComputerSystem.Reset" && r.Method == http.MethodPost:
		s.reset(w, r, m)
	case len(rest) >= 1 && rest[0] == "EthernetInterfaces":
		ethernet(w, m, base, rest[1:])
	case len(rest) >= 1 && rest[0] == "Storage":
		storage(w, m, base, rest[1:])
	case len(rest) == 1 && rest[0] == "SimpleStorage":
		writeJSON(w, http.StatusOK, collectionBody(base+"/SimpleStorage", "#SimpleStorageCollection.SimpleStorageCollection", "Simple Storage Collection",
			[]any{odataID(base + "/SimpleStorage/1")}))
	case len(rest) == 2 && rest[0] == "SimpleStorage" && rest[1] == "1":
		simpleStorage(w, m, base)
	case len(rest) == 1 && rest[0] == "Processors":
		writeJSON(w, http.StatusOK, collectionBody(base+"/Processors", "#ProcessorCollection.ProcessorCollection", "Processors",
			[]any{odataID(base + "/Processors/CPU0")}))
	case len(rest) == 2 && rest[0] == "Processors" && rest[1] == "CPU0":
		processor(w, m, base)
	default:
		notFound(w)
	}
}

func powerState(m *machine.Machine) string {
	if m.PoweredOn() {
		return "On"
	}
	return "Off"
}

func systemBody(m *machine.Machine, base string) map[string]any {
	hw := m.Hardware
	o := m.Override()
	enabled := "Once"
	if o.Continuous {
		enabled = "Continuous"
	}
	if o.Target == machine.BootNone {
		enabled = "Disabled"
	}
	mode := "UEFI"
	if !o.UEFI {
		mode = "Legacy"
	}
	return map[string]any{
		"@odata.id": base, "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
		"Id": m.ID, "Name": m.ID, "UUID": m.UUID, "SystemType": "Physical",
		"Manufacturer": hw.Manufacturer, "Model": hw.Model, "SerialNumber": hw.SerialNumber,
		"BiosVersion": hw.BIOSVersion, "PowerState": powerState(m),
		"Status": map[string]any{"State": "Enabled", "Health": "OK"},
		"Boot": map[string]any{
			"BootSourceOverrideTarget":                          string(o.Target),
			"BootSourceOverrideEnabled":                         enabled,
			"BootSourceOverrideMode":                            mode,
			"BootSourceOverrideTarget@Redfish.AllowableValues":  []string{"None", "Pxe", "Cd", "Hdd", "BiosSetup"},
			"BootSourceOverrideEnabled@Redfish.AllowableValues": []string{"Disabled", "Once", "Continuous"},
		},
		"ProcessorSummary": map[string]any{"Count": hw.CPUCount, "Model": hw.CPUModel, "Status": map[string]any{"State": "Enabled", "Health": "OK"}},
		"MemorySummary":    map[string]any{"TotalSystemMemoryGiB": float64(hw.RAMMiB) / 1024, "Status": map[string]any{"State": "Enabled", "Health": "OK"}},
		"Oem": map[string]any{"Metalshift": map[string]any{
			"ProcessorArchitecture": hw.CPUArch, "ProcessorMaxSpeedMHz": hw.CPUMHz,
			"BiosVendor": hw.BIOSVendor, "BiosReleaseDate": hw.BIOSDate,
		}},
		"EthernetInterfaces": odataID(base + "/EthernetInterfaces"),
		"Storage":            odataID(base + "/Storage"),
		"SimpleStorage":      odataID(base + "/SimpleStorage"),
		"Processors":         odataID(base + "/Processors"),
		"Links": map[string]any{
			"ManagedBy": []any{odataID("/redfish/v1/Managers/BMC-" + m.ID)},
		},
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
			"target":                            base + "/Actions/ComputerSystem.Reset",
			"ResetType@Redfish.AllowableValues": resetTypes,
		}},
	}
}

func (s *Server) patchSystem(w http.ResponseWriter, r *http.Request, m *machine.Machine) {
	if match := r.Header.Get("If-Match"); match != "" && match != "*" && match != s.etag(m.ID) {
		writeError(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "The ETag does not match the current state of the resource.")
		return
	}
	var body struct {
		Boot *struct {
			BootSourceOverrideTarget  *string
			BootSourceOverrideEnabled *string
			BootSourceOverrideMode    *string
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body is not valid JSON.")
		return
	}
	if body.Boot == nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyUnknown", "Only Boot can be changed.")
		return
	}
	o := m.Override()
	if t := body.Boot.BootSourceOverrideTarget; t != nil {
		switch machine.BootTarget(*t) {
		case machine.BootNone, machine.BootPxe, machine.BootCd, machine.BootHdd:
			o.Target = machine.BootTarget(*t)
		default:
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", fmt.Sprintf("BootSourceOverrideTarget %q is not supported.", *t))
			return
		}
	}
	if e := body.Boot.BootSourceOverrideEnabled; e != nil {
		switch *e {
		case "Once":
			o.Continuous = false
		case "Continuous":
			o.Continuous = true
		case "Disabled":
			o.Target = machine.BootNone
		default:
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", fmt.Sprintf("BootSourceOverrideEnabled %q is not supported.", *e))
			return
		}
	}
	if md := body.Boot.BootSourceOverrideMode; md != nil {
		o.UEFI = strings.EqualFold(*md, "UEFI")
	}
	m.SetOverride(o)
	s.bump(m.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request, m *machine.Machine) {
	var body struct{ ResetType string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body is not valid JSON.")
		return
	}
	var act func()
	switch body.ResetType {
	case "On", "ForceOn":
		act = m.PowerOn
	case "ForceOff", "GracefulShutdown":
		act = m.PowerOff
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		act = m.Reset
	case "Nmi":
		act = func() {}
	default:
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterNotSupported", fmt.Sprintf("ResetType %q is not supported.", body.ResetType))
		return
	}
	defer s.bump(m.ID)
	d := s.decider("/redfish/v1/Systems/" + m.ID)
	stuck, slow := d.Decide(fault.RedfishTask), d.Decide(fault.RedfishSlowPower)
	if stuck.Fired() {
		s.startTask(w, m.ID, nil)
		return
	}
	// Power actions take effect in the order they were accepted: one that
	// arrives while a slow one is pending waits for it.
	power := s.powerLock(m.ID)
	power.Lock()
	if slow.Fired() {
		go func() {
			defer power.Unlock()
			t := time.NewTimer(slow.Duration)
			defer t.Stop()
			<-t.C
			act()
			s.bump(m.ID)
		}()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer power.Unlock()
	if m.PowerLag() > 0 {
		s.startTask(w, m.ID, func() error { act(); s.bump(m.ID); return nil })
		return
	}
	act()
	w.WriteHeader(http.StatusNoContent)
}

func ethernet(w http.ResponseWriter, m *machine.Machine, base string, rest []string) {
	base += "/EthernetInterfaces"
	if len(rest) == 0 {
		var members []any
		for _, n := range m.Hardware.NICs {
			members = append(members, odataID(base+"/"+n.Name))
		}
		writeJSON(w, http.StatusOK, collectionBody(base, "#EthernetInterfaceCollection.EthernetInterfaceCollection", "Ethernet Interfaces", members))
		return
	}
	for _, n := range m.Hardware.NICs {
		if n.Name == rest[0] {
			body := map[string]any{
				"@odata.id": base + "/" + n.Name, "@odata.type": "#EthernetInterface.v1_6_0.EthernetInterface",
				"Id": n.Name, "Name": n.Name, "MACAddress": n.MAC, "PermanentMACAddress": n.MAC,
				"SpeedMbps": n.SpeedGbps * 1000, "LinkStatus": "LinkUp",
				"Status": map[string]any{"State": "Enabled", "Health": "OK"},
			}
			if n.IP != "" {
				body["IPv4Addresses"] = []any{map[string]any{"Address": n.IP}}
			}
			writeJSON(w, http.StatusOK, body)
			return
		}
	}
	notFound(w)
}

func storage(w http.ResponseWriter, m *machine.Machine, base string, rest []string) {
	base += "/Storage"
	switch {
	case len(rest) == 0:
		writeJSON(w, http.StatusOK, collectionBody(base, "#StorageCollection.StorageCollection", "Storage", []any{odataID(base + "/1")}))
	case len(rest) == 1 && rest[0] == "1":
		var drives []any
		for i := range m.Hardware.Disks {
			drives = append(drives, odataID(fmt.Sprintf("%s/1/Drives/%d", base, i)))
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"@odata.id": base + "/1", "@odata.type": "#Storage.v1_9_0.Storage", "Id": "1", "Name": "Storage",
			"Drives": drives, "Drives@odata.count": len(drives),
		})
	case len(rest) == 3 && rest[0] == "1" && rest[1] == "Drives":
		for i, d := range m.Hardware.Disks {
			if fmt.Sprint(i) == rest[2] {
				media := "SSD"
				if d.Rotational {
					media = "HDD"
				}
				writeJSON(w, http.StatusOK, map[string]any{
					"@odata.id": fmt.Sprintf("%s/1/Drives/%d", base, i), "@odata.type": "#Drive.v1_9_0.Drive",
					"Id": rest[2], "Name": d.Name, "CapacityBytes": d.SizeBytes, "Model": d.Model, "Manufacturer": d.Vendor,
					"SerialNumber": d.SerialNumber, "MediaType": media, "Protocol": map[bool]string{true: "NVMe", false: "SATA"}[d.Type == "NVME"],
					"Identifiers": []any{map[string]any{"DurableNameFormat": "NAA", "DurableName": d.WWN}},
					"Status":      map[string]any{"State": "Enabled", "Health": "OK"},
				})
				return
			}
		}
		notFound(w)
	default:
		notFound(w)
	}
}

func simpleStorage(w http.ResponseWriter, m *machine.Machine, base string) {
	var devices []any
	for _, d := range m.Hardware.Disks {
		devices = append(devices, map[string]any{"Name": d.Name, "CapacityBytes": d.SizeBytes, "Model": d.Model, "Manufacturer": d.Vendor,
			"Status": map[string]any{"State": "Enabled", "Health": "OK"}})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": base + "/SimpleStorage/1", "@odata.type": "#SimpleStorage.v1_2_0.SimpleStorage", "Id": "1", "Name": "Simple Storage",
		"Devices": devices,
	})
}

// processor describes all of a machine's cores as one processor.
func processor(w http.ResponseWriter, m *machine.Machine, base string) {
	hw := m.Hardware
	arch, isa := "x86", "x86-64"
	if hw.CPUArch == "aarch64" {
		arch, isa = "ARM", "ARM-A64"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": base + "/Processors/CPU0", "@odata.type": "#Processor.v1_7_0.Processor", "Id": "CPU0", "Name": "Processor",
		"ProcessorType": "CPU", "ProcessorArchitecture": arch, "InstructionSet": isa, "Model": hw.CPUModel,
		"MaxSpeedMHz": hw.CPUMHz, "TotalCores": hw.CPUCount, "TotalThreads": hw.CPUCount,
		"Status": map[string]any{"State": "Enabled", "Health": "OK"},
	})
}
