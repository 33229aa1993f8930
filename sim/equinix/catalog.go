package equinix

import (
	"net/http"
	"slices"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// The catalog the emulator offers: a few plans, metros (each with a
// facility) and operating systems, custom_ipxe among them.
var (
	metros = []equinixapi.Metro{
		{ID: "108b2cfb-246b-45e3-885a-bf3e82fce1a0", Code: "da", Name: "Dallas", Country: "US"},
		{ID: "2991b022-b8c4-497e-8db7-5a407c3a209b", Code: "sv", Name: "Silicon Valley", Country: "US"},
		{ID: "96a57b6d-c62c-41b5-ab8e-f8d63a7f9887", Code: "ny", Name: "New York", Country: "US"},
		{ID: "d3d6b29f-042d-43b7-b3ce-0bf53d5754ca", Code: "am", Name: "Amsterdam", Country: "NL"},
		{ID: "5afb3744-f80d-4b49-bf21-50ede9252cfd", Code: "fr", Name: "Frankfurt", Country: "DE"},
	}
	facilities = []equinixapi.Facility{
		{ID: "6d6d9bb5-4b3b-4d4b-a6a2-5e6c3cb0e5a1", Code: "da11", Name: "Dallas 11"},
		{ID: "4e3b3c2a-2b4d-4e0f-9a43-1c2a8b6c7d8e", Code: "sv15", Name: "Silicon Valley 15"},
		{ID: "9b1f8e3c-7d6a-4c5b-8e2f-3a4b5c6d7e8f", Code: "ny5", Name: "New York 5"},
		{ID: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", Code: "am6", Name: "Amsterdam 6"},
		{ID: "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f", Code: "fr2", Name: "Frankfurt 2"},
	}
	plans = []equinixapi.Plan{
		{ID: "e69c0169-4726-46ea-98f1-939c9e8a3607", Slug: "c3.small.x86", Name: "c3.small.x86", Class: "c3.small.x86", Line: "baremetal",
			Specs: equinixapi.PlanSpecs{CPUs: 8, Memory: "32GB", Drives: "2 x 480GB SSD", NICs: 2}},
		{ID: "b2cde2dd-9b8f-4a0c-8e9a-fd7a3cd0a2f1", Slug: "m3.small.x86", Name: "m3.small.x86", Class: "m3.small.x86", Line: "baremetal",
			Specs: equinixapi.PlanSpecs{CPUs: 8, Memory: "64GB", Drives: "2 x 480GB SSD", NICs: 2}},
		{ID: "2b2ad1f4-2c2f-4a4c-8a8f-7d0b3f6b1e55", Slug: "c3.medium.x86", Name: "c3.medium.x86", Class: "c3.medium.x86", Line: "baremetal",
			Specs: equinixapi.PlanSpecs{CPUs: 24, Memory: "64GB", Drives: "2 x 240GB SSD, 2 x 480GB SSD", NICs: 2}},
		{ID: "6d1f1ffa-7912-4b78-b50d-88cc7c8ab40f", Slug: "m3.large.x86", Name: "m3.large.x86", Class: "m3.large.x86", Line: "baremetal",
			Specs: equinixapi.PlanSpecs{CPUs: 32, Memory: "256GB", Drives: "2 x 240GB SSD, 2 x 3.8TB NVMe", NICs: 2}},
	}
	operatingSystems = []equinixapi.OperatingSystem{
		{ID: "5a1b2c3d-0000-4000-8000-000000000001", Slug: equinixapi.OSCustomIPXE, Name: "Custom iPXE", Distro: "custom_ipxe", Version: "1"},
		{ID: "5a1b2c3d-0000-4000-8000-000000000002", Slug: "ubuntu_24_04", Name: "Ubuntu 24.04 LTS", Distro: "ubuntu", Version: "24.04"},
		{ID: "5a1b2c3d-0000-4000-8000-000000000003", Slug: "rocky_9", Name: "Rocky Linux 9", Distro: "rocky", Version: "9"},
		{ID: "5a1b2c3d-0000-4000-8000-000000000004", Slug: "flatcar_stable", Name: "Flatcar Container Linux (stable)", Distro: "flatcar", Version: "stable"},
	}
)

func init() {
	for i := range facilities {
		facilities[i].Metro = &metros[i]
	}
	codes := make([]string, len(metros))
	for i, m := range metros {
		codes[i] = m.Code
	}
	slugs := make([]string, len(plans))
	for i := range plans {
		plans[i].AvailableInMetros = codes
		slugs[i] = plans[i].Slug
	}
	for i := range operatingSystems {
		operatingSystems[i].ProvisionableOn = slugs
	}
}

func findMetro(code string) *equinixapi.Metro {
	if code == "any" {
		return &metros[0]
	}
	i := slices.IndexFunc(metros, func(m equinixapi.Metro) bool { return m.Code == code || m.ID == code })
	if i < 0 {
		return nil
	}
	return &metros[i]
}

func findFacility(code string) *equinixapi.Facility {
	if code == "any" {
		return &facilities[0]
	}
	i := slices.IndexFunc(facilities, func(f equinixapi.Facility) bool { return f.Code == code || f.ID == code })
	if i < 0 {
		return nil
	}
	return &facilities[i]
}

// facilityOf is the metro's facility.
func facilityOf(metro string) *equinixapi.Facility {
	i := slices.IndexFunc(facilities, func(f equinixapi.Facility) bool { return f.Metro.Code == metro })
	if i < 0 {
		return nil
	}
	return &facilities[i]
}

func findPlan(slug string) *equinixapi.Plan {
	i := slices.IndexFunc(plans, func(p equinixapi.Plan) bool { return p.Slug == slug || p.ID == slug })
	if i < 0 {
		return nil
	}
	return &plans[i]
}

func findOS(slug string) *equinixapi.OperatingSystem {
	i := slices.IndexFunc(operatingSystems, func(o equinixapi.OperatingSystem) bool { return o.Slug == slug || o.ID == slug })
	if i < 0 {
		return nil
	}
	return &operatingSystems[i]
}

func (s *Server) listPlans(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, equinixapi.PlanList{Plans: plans})
}

func (s *Server) listMetros(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, equinixapi.MetroList{Metros: metros})
}

func (s *Server) listOperatingSystems(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, equinixapi.OperatingSystemList{OperatingSystems: operatingSystems})
}
