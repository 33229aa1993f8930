package equinix

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// TestAuth: no key or an unknown one is 401 with a JSON error; another
// key's project, devices and addresses are 403; unknown IDs are 404.
func TestAuth(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	d := e.create("a-0")

	var er equinixapi.ErrorResponse
	status, h := e.callAs("", "GET", "/metal/v1/projects/"+e.project, nil, &er)
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	g.Expect(er.Errors).NotTo(BeEmpty())
	g.Expect(h.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(h.Get(equinixapi.RateLimitLimitHeader)).NotTo(BeEmpty(), "every answer has the rate-limit headers")
	status, _ = e.callAs("not-a-key", "GET", "/metal/v1/devices/"+d.ID, nil, nil)
	g.Expect(status).To(Equal(http.StatusUnauthorized))

	other := e.s.NewToken()
	for _, path := range []string{"/metal/v1/projects/" + e.project, "/metal/v1/projects/" + e.project + "/devices",
		"/metal/v1/devices/" + d.ID, "/metal/v1/devices/" + d.ID + "/ips", "/metal/v1/ips/" + d.IPAddresses[0].ID} {
		status, _ := e.callAs(other, "GET", path, nil, nil)
		g.Expect(status).To(Equal(http.StatusForbidden), path)
	}
	status, _ = e.callAs(other, "POST", "/metal/v1/projects/"+e.project+"/devices", equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9"}, nil)
	g.Expect(status).To(Equal(http.StatusForbidden))
	status, _ = e.callAs(other, "DELETE", "/metal/v1/devices/"+d.ID, nil, nil)
	g.Expect(status).To(Equal(http.StatusForbidden))
	var mine equinixapi.ProjectList
	e.callAs(other, "GET", "/metal/v1/projects", nil, &mine)
	g.Expect(mine.Projects).To(BeEmpty(), "a key lists its own projects only")

	for _, path := range []string{"/metal/v1/devices/7f0c7a0e-1111-4222-8333-944455556666", "/metal/v1/projects/7f0c7a0e-1111-4222-8333-944455556666",
		"/metal/v1/ips/7f0c7a0e-1111-4222-8333-944455556666", "/metal/v1/nothing"} {
		status, errs := e.errorsOf("GET", path, nil)
		g.Expect(status).To(Equal(http.StatusNotFound), path)
		g.Expect(errs).NotTo(BeEmpty(), path)
	}
}

// TestPagination: lists come a page at a time with the meta block; a
// page size over 1000 is cut to 1000.
func TestPagination(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	for i := range 25 {
		e.create(fmt.Sprintf("host-%02d", i))
		e.clock.Step(time.Millisecond) // creation order is list order
	}
	base := "/metal/v1/projects/" + e.project + "/devices"
	var seen []string
	for page := 1; page <= 3; page++ {
		var l equinixapi.DeviceList
		status, _ := e.call("GET", base+"?per_page=10&page="+strconv.Itoa(page), nil, &l)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(l.Meta.Total).To(Equal(25))
		g.Expect(l.Meta.LastPage).To(Equal(3))
		g.Expect(l.Meta.CurrentPage).To(Equal(page))
		g.Expect(l.Meta.First.Href).To(ContainSubstring("page=1"))
		g.Expect(l.Meta.Last.Href).To(ContainSubstring("page=3"))
		if page < 3 {
			g.Expect(l.Devices).To(HaveLen(10))
			g.Expect(l.Meta.Next.Href).To(Equal(base + "?page=" + strconv.Itoa(page+1) + "&per_page=10"))
		} else {
			g.Expect(l.Devices).To(HaveLen(5))
			g.Expect(l.Meta.Next).To(BeNil(), "no next page after the last")
		}
		if page == 1 {
			g.Expect(l.Meta.Previous).To(BeNil())
		}
		for _, d := range l.Devices {
			seen = append(seen, d.Hostname)
		}
	}
	g.Expect(seen).To(HaveLen(25))
	g.Expect(seen[0]).To(Equal("host-00"))
	g.Expect(seen[24]).To(Equal("host-24"))

	var l equinixapi.DeviceList
	e.call("GET", base, nil, &l)
	g.Expect(l.Devices).To(HaveLen(10), "10 a page by default")
	e.call("GET", base+"?per_page=5000", nil, &l)
	g.Expect(l.Devices).To(HaveLen(25))
	g.Expect(l.Meta.Self.Href).To(ContainSubstring("per_page=1000"), "at most 1000 a page")
	e.call("GET", base+"?page=9", nil, &l)
	g.Expect(l.Devices).To(BeEmpty())
	status, errs := e.errorsOf("GET", base+"?page=0", nil)
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("page"))
}

// TestTagFilter: ?tag= lists the devices that have the tag.
func TestTagFilter(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	e.create("m-0", "cluster:a", "role:master")
	e.create("w-0", "cluster:a", "role:worker")
	e.create("m-1", "cluster:b", "role:master")
	names := func(query string) []string {
		var l equinixapi.DeviceList
		e.call("GET", "/metal/v1/projects/"+e.project+"/devices?"+query, nil, &l)
		var out []string
		for _, d := range l.Devices {
			out = append(out, d.Hostname)
		}
		return out
	}
	g.Expect(names("tag=cluster:a")).To(ConsistOf("m-0", "w-0"))
	g.Expect(names("tag=role:master")).To(ConsistOf("m-0", "m-1"))
	g.Expect(names("tag=cluster:c")).To(BeEmpty())
	g.Expect(names("hostname=w-0")).To(ConsistOf("w-0"))
}

// TestStateMachine: queued → provisioning → active on the fake clock,
// the machine told at provisioning; delete → deprovisioning → 404.
func TestStateMachine(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	d := e.create("sm-0", "x")
	g.Expect(d.State).To(Equal(equinixapi.StateQueued))
	g.Expect(d.IPAddresses).To(HaveLen(3))
	g.Expect(d.NetworkPorts).To(HaveLen(3), "bond0, eth0, eth1")
	g.Expect(d.NetworkPorts[1].Data.MAC).NotTo(Equal(d.NetworkPorts[2].Data.MAC))
	g.Expect(e.machines.got()).To(BeEmpty())

	e.clock.Step(testTimings.Queued - time.Second)
	got, _ := e.device(d.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateQueued))
	e.clock.Step(time.Second)
	got, _ = e.device(d.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateProvisioning))
	g.Expect(e.machines.got()).To(Equal([]string{"provision sm-0"}))
	m := e.machines.last[d.ID]
	g.Expect(m.MACs).To(Equal([]string{d.NetworkPorts[1].Data.MAC, d.NetworkPorts[2].Data.MAC}))
	g.Expect(m.IPXEScriptURL).To(Equal("http://127.0.0.1:8080/boot.ipxe"))
	g.Expect(m.Userdata).To(ContainSubstring("ignition"))
	g.Expect(m.Addresses).To(HaveLen(3))
	g.Expect(m.Addresses[0].Addr().String()).To(Equal(d.IPAddresses[0].Address))

	e.clock.Step(testTimings.Provisioning)
	got, _ = e.device(d.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateActive))
	g.Expect(got.ProvisioningPercentage).To(Equal(100.0))

	status, _ := e.call("DELETE", "/metal/v1/devices/"+d.ID+"?force_delete=true", nil, nil)
	g.Expect(status).To(Equal(http.StatusNoContent))
	got, _ = e.device(d.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateDeprovisioning))
	g.Expect(e.machines.got()).To(Equal([]string{"provision sm-0", "deprovision " + d.ID}))
	e.clock.Step(testTimings.Deprovisioning)
	_, status = e.device(d.ID)
	g.Expect(status).To(Equal(http.StatusNotFound))
	g.Expect(e.s.Ledger().Empty()).To(BeTrue())

	// One long step carries out every transition in turn.
	d = e.create("sm-1")
	e.clock.Step(time.Hour)
	got, _ = e.device(d.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateActive))
	g.Expect(got.IPAddresses[0].Address).To(Equal("127.64.0.1"), "the deleted device's addresses are handed out again")
	g.Expect(got.IPAddresses[0].Gateway).To(Equal("127.64.0.0"))
	g.Expect(got.IPAddresses[1].Address).To(Equal("127.65.0.1"))
	g.Expect(got.IPAddresses[2].AddressFamily).To(Equal(6))
}

// TestFaults: equinix.failed ends a device failed without a machine;
// equinix.slowprovision makes it provision longer; equinix.nohardware
// refuses a create with 422; equinix.5xx answers requests with the status.
func TestFaults(t *testing.T) {
	g := NewWithT(t)
	plan := mustPlan("seed=1,equinix.failed[bad-0]=@1,equinix.slowprovision[slow-0]=@1:10m,equinix.nohardware[none-0]=@1")
	e := newEnv(t, Options{Faults: plan})
	bad := e.create("bad-0")
	slow := e.create("slow-0")
	e.clock.Step(testTimings.Queued + testTimings.Provisioning)
	got, _ := e.device(bad.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateFailed))
	got, _ = e.device(slow.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateProvisioning), "10 minutes more")
	g.Expect(e.machines.got()).To(Equal([]string{"provision slow-0"}), "a failed device never reaches a machine")
	e.clock.Step(10 * time.Minute)
	got, _ = e.device(slow.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateActive))

	// A reinstall is a new decision: the failed device comes back.
	status, _ := e.call("POST", "/metal/v1/devices/"+bad.ID+"/actions", equinixapi.DeviceActionInput{Type: equinixapi.ActionReinstall}, nil)
	g.Expect(status).To(Equal(http.StatusAccepted))
	got, _ = e.device(bad.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateReinstalling))
	e.clock.Step(testTimings.Provisioning)
	got, _ = e.device(bad.ID)
	g.Expect(got.State).To(Equal(equinixapi.StateActive))

	status, errs := e.errorsOf("POST", "/metal/v1/projects/"+e.project+"/devices", equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9", Hostname: "none-0"})
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("no available hardware"))
	e.create("none-0") // the second try gets one
	g.Expect(plan.Fired("equinix.nohardware")).To(Equal(1))
}

// TestFaultsReplay: the same plan and seed answer the same requests with
// the same 5xx; another seed differs.
func TestFaultsReplay(t *testing.T) {
	g := NewWithT(t)
	run := func(plan string) []int {
		e := newEnv(t, Options{Faults: mustPlan(plan)})
		var statuses []int
		for range 40 {
			status, _ := e.call("GET", "/metal/v1/projects/"+e.project, nil, nil)
			statuses = append(statuses, status)
		}
		return statuses
	}
	a := run("seed=7,equinix.5xx=30%:503")
	g.Expect(run("seed=7,equinix.5xx=30%:503")).To(Equal(a))
	g.Expect(a).To(ContainElement(http.StatusServiceUnavailable))
	g.Expect(a).To(ContainElement(http.StatusOK))
	g.Expect(run("seed=8,equinix.5xx=30%:503")).NotTo(Equal(a))
}

// TestActions: power off and on through their transitional states, a
// reboot, refusals in the wrong state or of an unknown type.
func TestActions(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	d := e.create("act-0")
	path := "/metal/v1/devices/" + d.ID + "/actions"
	status, errs := e.errorsOf("POST", path, equinixapi.DeviceActionInput{Type: equinixapi.ActionPowerOff})
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity), "queued")
	g.Expect(errs[0]).To(ContainSubstring("queued"))
	e.clock.Step(time.Hour)

	state := func() string { got, _ := e.device(d.ID); return got.State }
	status, _ = e.call("POST", path, equinixapi.DeviceActionInput{Type: equinixapi.ActionPowerOff}, nil)
	g.Expect(status).To(Equal(http.StatusAccepted))
	g.Expect(state()).To(Equal(equinixapi.StatePoweringOff))
	e.clock.Step(testTimings.Power)
	g.Expect(state()).To(Equal(equinixapi.StateInactive))
	status, _ = e.call("POST", path, equinixapi.DeviceActionInput{Type: equinixapi.ActionReboot}, nil)
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity), "off")
	status, _ = e.call("POST", path, equinixapi.DeviceActionInput{Type: equinixapi.ActionPowerOn}, nil)
	g.Expect(status).To(Equal(http.StatusAccepted))
	g.Expect(state()).To(Equal(equinixapi.StatePoweringOn))
	e.clock.Step(testTimings.Power)
	g.Expect(state()).To(Equal(equinixapi.StateActive))
	status, _ = e.call("POST", path, equinixapi.DeviceActionInput{Type: equinixapi.ActionReboot}, nil)
	g.Expect(status).To(Equal(http.StatusAccepted))
	status, errs = e.errorsOf("POST", path, equinixapi.DeviceActionInput{Type: "explode"})
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("power_on"))
	g.Expect(e.machines.got()).To(Equal([]string{"provision act-0", "power_off " + d.ID, "power_on " + d.ID, "reboot " + d.ID}))

	// An update changes what the device boots next, and its tags.
	tags := []string{"one", "two"}
	url := "https://boot.example/next.ipxe"
	var up equinixapi.Device
	status, _ = e.call("PUT", "/metal/v1/devices/"+d.ID, equinixapi.DeviceUpdateInput{Tags: &tags, IPXEScriptURL: &url}, &up)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(up.Tags).To(Equal(tags))
	g.Expect(up.IPXEScriptURL).To(Equal(url))
	status, _ = e.call("POST", path, equinixapi.DeviceActionInput{Type: equinixapi.ActionReinstall}, nil)
	g.Expect(status).To(Equal(http.StatusAccepted))
	g.Expect(e.machines.last[d.ID].Reinstall).To(BeTrue())
	g.Expect(e.machines.last[d.ID].IPXEScriptURL).To(Equal(url))
}

// TestCreateValidation: custom_ipxe needs an iPXE script (URL or
// userdata); errors name the field.
func TestCreateValidation(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{MaxUserdata: 100})
	path := "/metal/v1/projects/" + e.project + "/devices"
	for _, tc := range []struct {
		in   equinixapi.DeviceCreateInput
		want string
	}{
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE}, "ipxe_script_url is required"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE, Userdata: "#cloud-config"}, "ipxe_script_url is required"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9", IPXEScriptURL: "http://x/y"}, "ipxe_script_url is only for"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: equinixapi.OSCustomIPXE, IPXEScriptURL: "ftp://x/y"}, "ipxe_script_url \"ftp://x/y\""},
		{equinixapi.DeviceCreateInput{Metro: "zz", Plan: "c3.small.x86", OperatingSystem: "rocky_9"}, "metro \"zz\""},
		{equinixapi.DeviceCreateInput{Plan: "c3.small.x86", OperatingSystem: "rocky_9"}, "metro is required"},
		{equinixapi.DeviceCreateInput{Metro: "da", Facility: equinixapi.StringOrList{"da11"}, Plan: "c3.small.x86", OperatingSystem: "rocky_9"}, "exclusive"},
		{equinixapi.DeviceCreateInput{Metro: "da", OperatingSystem: "rocky_9"}, "plan is required"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "x9.huge", OperatingSystem: "rocky_9"}, "plan \"x9.huge\""},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86"}, "operating_system is required"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9", BillingCycle: "weekly"}, "billing_cycle"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9", HardwareReservationID: "mine"}, "hardware_reservation_id"},
		{equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9", Userdata: string(make([]byte, 101))}, "userdata is 101 bytes"},
	} {
		status, errs := e.errorsOf("POST", path, tc.in)
		g.Expect(status).To(Equal(http.StatusUnprocessableEntity), tc.want)
		g.Expect(errs).To(ContainElement(ContainSubstring(tc.want)))
	}
	var d equinixapi.Device
	status, _ := e.call("POST", path, equinixapi.DeviceCreateInput{Facility: equinixapi.StringOrList{"sv15", "any"}, Plan: "c3.small.x86",
		OperatingSystem: equinixapi.OSCustomIPXE, Userdata: "#!ipxe\nchain http://x/y"}, &d)
	g.Expect(status).To(Equal(http.StatusCreated), "iPXE userdata, a facility list")
	g.Expect(d.Metro.Code).To(Equal("sv"))
	g.Expect(d.Facility.Code).To(Equal("sv15"))
	g.Expect(d.HardwareReservation).To(BeNil())
	g.Expect(d.BillingCycle).To(Equal(equinixapi.BillingHourly))
}

// TestRateLimit: the headers count down; past the limit 429 until the
// window ends.
func TestRateLimit(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{RateLimit: 3, RateWindow: time.Minute})
	reset := strconv.FormatInt(e.clock.Now().Add(time.Minute).Unix(), 10)
	for i := range 3 {
		status, h := e.call("GET", "/metal/v1/plans", nil, nil)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(h.Get(equinixapi.RateLimitLimitHeader)).To(Equal("3"))
		g.Expect(h.Get(equinixapi.RateLimitRemainingHeader)).To(Equal(strconv.Itoa(2 - i)))
		g.Expect(h.Get(equinixapi.RateLimitResetHeader)).To(Equal(reset))
	}
	var er equinixapi.ErrorResponse
	status, h := e.call("GET", "/metal/v1/plans", nil, &er)
	g.Expect(status).To(Equal(http.StatusTooManyRequests))
	g.Expect(h.Get(equinixapi.RateLimitRemainingHeader)).To(Equal("0"))
	g.Expect(er.Errors[0]).To(ContainSubstring("rate limit"))
	other := e.s.NewToken()
	status, _ = e.callAs(other, "GET", "/metal/v1/plans", nil, nil)
	g.Expect(status).To(Equal(http.StatusOK), "each key has its own window")
	e.clock.Step(time.Minute)
	status, h = e.call("GET", "/metal/v1/plans", nil, nil)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(h.Get(equinixapi.RateLimitRemainingHeader)).To(Equal("2"))
}

// TestCatalogAndRequestCounts: plans, metros and operating systems
// (custom_ipxe among them) are listed; requests are counted by template.
func TestCatalogAndRequestCounts(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	var pl equinixapi.PlanList
	var ml equinixapi.MetroList
	var ol equinixapi.OperatingSystemList
	e.call("GET", "/metal/v1/plans", nil, &pl)
	e.call("GET", "/metal/v1/locations/metros", nil, &ml)
	e.call("GET", "/metal/v1/operating-systems", nil, &ol)
	g.Expect(pl.Plans).NotTo(BeEmpty())
	g.Expect(ml.Metros).To(ContainElement(HaveField("Code", "da")))
	g.Expect(ol.OperatingSystems).To(ContainElement(HaveField("Slug", equinixapi.OSCustomIPXE)))
	d := e.create("count-0")
	e.device(d.ID)
	e.device(d.ID)
	g.Expect(e.s.Requests()).To(Equal(map[string]int{
		"GET /metal/v1/plans": 1, "GET /metal/v1/locations/metros": 1, "GET /metal/v1/operating-systems": 1,
		"POST /metal/v1/projects/{id}/devices": 1, "GET /metal/v1/devices/{id}": 2,
	}))
}

// TestHardwareReservations: a device runs on the hardware reservation it
// names, or on the next free one of its plan and metro; one in use, of
// another project or of another plan is refused with 422 naming the
// field; a deleted device frees its reservation.
func TestHardwareReservations(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	h1, err := e.s.AddHardwareReservation(e.project, "da", "c3.small.x86")
	g.Expect(err).NotTo(HaveOccurred())
	e.clock.Step(time.Second)
	h2, _ := e.s.AddHardwareReservation(e.project, "da", "c3.small.x86")
	hm, _ := e.s.AddHardwareReservation(e.project, "da", "m3.small.x86")
	otherToken := e.s.NewToken()
	otherProject, _ := e.s.CreateProject(otherToken, "other")
	ho, _ := e.s.AddHardwareReservation(otherProject.ID, "da", "c3.small.x86")
	_, err = e.s.AddHardwareReservation(e.project, "zz", "c3.small.x86")
	g.Expect(err).To(HaveOccurred())

	path := "/metal/v1/projects/" + e.project + "/devices"
	in := func(hostname, hw string) equinixapi.DeviceCreateInput {
		return equinixapi.DeviceCreateInput{Metro: "da", Plan: "c3.small.x86", OperatingSystem: "rocky_9", Hostname: hostname, HardwareReservationID: hw}
	}
	var d2 equinixapi.Device
	status, _ := e.call("POST", path, in("hw-2", h2), &d2)
	g.Expect(status).To(Equal(http.StatusCreated))
	g.Expect(d2.HardwareReservation.ID).To(Equal(h2), "the one named")
	var dn equinixapi.Device
	status, _ = e.call("POST", path, in("hw-n", equinixapi.HardwareReservationNextAvailable), &dn)
	g.Expect(status).To(Equal(http.StatusCreated))
	g.Expect(dn.HardwareReservation.ID).To(Equal(h1), "the free one")
	status, errs := e.errorsOf("POST", path, in("hw-x", equinixapi.HardwareReservationNextAvailable))
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("no available hardware reservations"))
	for hw, want := range map[string]string{h2: "in use by device " + d2.ID, ho: "not a hardware reservation of the project", hm: "is a m3.small.x86 in da"} {
		status, errs := e.errorsOf("POST", path, in("hw-y", hw))
		g.Expect(status).To(Equal(http.StatusUnprocessableEntity), want)
		g.Expect(errs[0]).To(ContainSubstring("hardware_reservation_id"))
		g.Expect(errs[0]).To(ContainSubstring(want))
	}

	var l equinixapi.HardwareReservationList
	e.call("GET", "/metal/v1/projects/"+e.project+"/hardware-reservations", nil, &l)
	g.Expect(l.HardwareReservations).To(HaveLen(3))
	g.Expect(l.HardwareReservations[0].Device.ID).To(Equal(dn.ID))
	for _, h := range l.HardwareReservations {
		g.Expect(h.Provisionable).To(Equal(h.ID == hm), h.ID)
	}
	status, _ = e.call("GET", "/metal/v1/hardware-reservations/"+ho, nil, nil)
	g.Expect(status).To(Equal(http.StatusForbidden))

	e.call("DELETE", "/metal/v1/devices/"+d2.ID, nil, nil)
	e.clock.Step(testTimings.Deprovisioning)
	var h equinixapi.HardwareReservation
	e.call("GET", "/metal/v1/hardware-reservations/"+h2, nil, &h)
	g.Expect(h.Provisionable).To(BeTrue(), "freed with its device")
	g.Expect(h.Device).To(BeNil())
}

// TestForbidFailed: with the option, a failed device answers 403, as
// the archived provider assumed; without it, 200 with state failed.
func TestForbidFailed(t *testing.T) {
	g := NewWithT(t)
	for _, forbid := range []bool{false, true} {
		e := newEnv(t, Options{ForbidFailed: forbid, Faults: mustPlan("equinix.failed=@1")})
		d := e.create("ff-0")
		e.clock.Step(time.Hour)
		got, status := e.device(d.ID)
		if forbid {
			g.Expect(status).To(Equal(http.StatusForbidden))
			continue
		}
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(got.State).To(Equal(equinixapi.StateFailed))
	}
}
