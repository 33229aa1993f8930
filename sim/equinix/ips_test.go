package equinix

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	equinixapi "github.com/metalshift/metalshift/api/equinixmetal/v1"
)

// TestIPQuota: a request over the project's quota is pending, or refused
// with 422 when it must not wait for approval.
func TestIPQuota(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{IPQuota: 4})
	path := "/metal/v1/projects/" + e.project + "/ips"
	var res equinixapi.IPReservation
	status, _ := e.call("POST", path, equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 4, Metro: "da", Tags: []string{"cluster:a"}}, &res)
	g.Expect(status).To(Equal(http.StatusCreated))
	g.Expect(res.State).To(Equal(equinixapi.IPStateCreated))
	g.Expect(res.Address).To(Equal("127.66.0.0"))
	g.Expect(res.CIDR).To(Equal(30))
	g.Expect(res.Metro.Code).To(Equal("da"))

	status, errs := e.errorsOf("POST", path, equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da", FailOnApprovalRequired: true})
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("needs approval"))
	var pending equinixapi.IPReservation
	status, _ = e.call("POST", path, equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da"}, &pending)
	g.Expect(status).To(Equal(http.StatusCreated))
	g.Expect(pending.State).To(Equal(equinixapi.IPStatePending))
	g.Expect(pending.Address).To(BeEmpty())
	var private equinixapi.IPReservation
	status, _ = e.call("POST", path, equinixapi.IPReservationRequest{Type: equinixapi.IPTypePrivateIPv4, Quantity: 8, Metro: "da", FailOnApprovalRequired: true}, &private)
	g.Expect(status).To(Equal(http.StatusCreated), "private addresses are not in the quota")

	for _, tc := range []struct {
		in   equinixapi.IPReservationRequest
		want string
	}{
		{equinixapi.IPReservationRequest{Type: "public_ipv5", Quantity: 1, Metro: "da"}, "type"},
		{equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 3, Metro: "da"}, "quantity"},
		{equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1}, "metro is required"},
	} {
		status, errs := e.errorsOf("POST", path, tc.in)
		g.Expect(status).To(Equal(http.StatusUnprocessableEntity), tc.want)
		g.Expect(errs).To(ContainElement(ContainSubstring(tc.want)))
	}
	var l equinixapi.IPReservationList
	e.call("GET", path+"?types=public_ipv4", nil, &l)
	g.Expect(l.IPAddresses).To(HaveLen(2))
	g.Expect(l.Meta.Total).To(Equal(2))
}

// TestAssignUnassignRelease: an address of a reservation is assigned to a
// device and shows on it; a block with an assignment is not released;
// DELETE of the assignment unassigns, of the reservation releases it.
func TestAssignUnassignRelease(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	d := e.create("eip-0")
	e.clock.Step(time.Hour)
	var res equinixapi.IPReservation
	e.call("POST", "/metal/v1/projects/"+e.project+"/ips", equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da", Tags: []string{"api"}}, &res)
	g.Expect(res.Address).To(Equal("127.66.0.0"))

	var a equinixapi.IPAssignment
	status, _ := e.call("POST", "/metal/v1/devices/"+d.ID+"/ips", equinixapi.IPAssignmentInput{Address: res.Address}, &a)
	g.Expect(status).To(Equal(http.StatusCreated))
	g.Expect(a.Address).To(Equal("127.66.0.0"))
	g.Expect(a.CIDR).To(Equal(32))
	g.Expect(a.AssignedTo.ID).To(Equal(d.ID))
	g.Expect(a.ParentBlock.Href).To(Equal(res.Href))
	var dl equinixapi.IPAssignmentList
	e.call("GET", "/metal/v1/devices/"+d.ID+"/ips", nil, &dl)
	g.Expect(dl.IPAddresses).To(HaveLen(4))
	g.Expect(dl.IPAddresses[3].ID).To(Equal(a.ID))
	status, errs := e.errorsOf("POST", "/metal/v1/devices/"+d.ID+"/ips", equinixapi.IPAssignmentInput{Address: res.Address + "/32"})
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("already assigned"))
	status, errs = e.errorsOf("POST", "/metal/v1/devices/"+d.ID+"/ips", equinixapi.IPAssignmentInput{Address: "127.66.9.9"})
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(errs[0]).To(ContainSubstring("not in a reservation"))

	var got equinixapi.IPReservation
	e.call("GET", "/metal/v1/ips/"+res.ID, nil, &got)
	g.Expect(got.Assignments).To(HaveLen(1))
	status, errs = e.errorsOf("DELETE", "/metal/v1/ips/"+res.ID, nil)
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity), "assigned: not released")
	g.Expect(errs[0]).To(ContainSubstring("unassign"))
	status, _ = e.errorsOf("DELETE", "/metal/v1/ips/"+d.IPAddresses[0].ID, nil)
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity), "a device's own address")

	tags := []string{"api", "moved"}
	e.call("PATCH", "/metal/v1/ips/"+res.ID, equinixapi.IPReservationUpdateInput{Tags: &tags}, &got)
	g.Expect(got.Tags).To(Equal(tags))
	g.Expect(e.s.Ledger().Tags).To(ContainElement("moved"))

	status, _ = e.call("DELETE", "/metal/v1/ips/"+a.ID, nil, nil)
	g.Expect(status).To(Equal(http.StatusNoContent))
	e.call("GET", "/metal/v1/ips/"+res.ID, nil, &got)
	g.Expect(got.Assignments).To(BeEmpty())
	status, _ = e.call("DELETE", "/metal/v1/ips/"+res.ID, nil, nil)
	g.Expect(status).To(Equal(http.StatusNoContent))
	status, _ = e.call("GET", "/metal/v1/ips/"+res.ID, nil, nil)
	g.Expect(status).To(Equal(http.StatusNotFound))

	// A device's delete unassigns what it holds.
	e.call("POST", "/metal/v1/projects/"+e.project+"/ips", equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da"}, &res)
	e.call("POST", "/metal/v1/devices/"+d.ID+"/ips", equinixapi.IPAssignmentInput{Address: res.Address}, &a)
	e.call("DELETE", "/metal/v1/devices/"+d.ID, nil, nil)
	e.call("GET", "/metal/v1/ips/"+res.ID, nil, &got)
	g.Expect(got.Assignments).To(BeEmpty())
}

// metadataClient calls from source address src, as a device does.
func metadataClient(src string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// TestMetadataBySource: each device, calling from its own address
// (private or public, or an elastic one assigned to it), reads its own
// metadata and userdata; any other caller gets 404.
func TestMetadataBySource(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{SSHKeys: []string{"ssh-ed25519 AAAA test"}})
	md := httptest.NewServer(e.s.MetadataHandler())
	t.Cleanup(md.Close)
	a := e.create("md-a", "role:master")
	b := e.create("md-b", "role:worker")
	var upd equinixapi.Device
	custom := map[string]any{"cluster": "a"}
	e.call("PUT", "/metal/v1/devices/"+a.ID, equinixapi.DeviceUpdateInput{Customdata: &custom}, &upd)

	status, _ := get(t, metadataClient(a.IPAddresses[0].Address), md.URL+"/metadata")
	g.Expect(status).To(Equal(http.StatusNotFound), "queued: no metadata yet")
	e.clock.Step(testTimings.Queued)

	for _, tc := range []struct {
		d    equinixapi.Device
		src  string
		host string
		tag  string
	}{{a, a.IPAddresses[0].Address, "md-a", "role:master"}, {b, b.IPAddresses[0].Address, "md-b", "role:worker"}, {b, b.IPAddresses[1].Address, "md-b", "role:worker"}} {
		status, data := get(t, metadataClient(tc.src), md.URL+"/metadata")
		g.Expect(status).To(Equal(http.StatusOK), tc.src)
		var m equinixapi.Metadata
		g.Expect(json.Unmarshal(data, &m)).To(Succeed())
		g.Expect(m.ID).To(Equal(tc.d.ID))
		g.Expect(m.Hostname).To(Equal(tc.host))
		g.Expect(m.Tags).To(Equal([]string{tc.tag}))
		g.Expect(m.Metro).To(Equal("da"))
		g.Expect(m.Plan).To(Equal("c3.small.x86"))
		g.Expect(m.SSHKeys).To(Equal([]string{"ssh-ed25519 AAAA test"}))
		g.Expect(m.OperatingSystem.Slug).To(Equal(equinixapi.OSCustomIPXE))
		g.Expect(m.Network.Bonding.Mode).To(Equal(4))
		g.Expect(m.Network.Interfaces).To(HaveLen(2))
		g.Expect(m.Network.Interfaces[0].MAC).To(Equal(tc.d.NetworkPorts[1].Data.MAC))
		g.Expect(m.Network.Interfaces[0].Bond).To(Equal("bond0"))
		g.Expect(m.Network.Addresses).To(HaveLen(3))
		for i, addr := range m.Network.Addresses {
			g.Expect(addr.Address).To(Equal(tc.d.IPAddresses[i].Address))
			g.Expect(addr.Gateway).NotTo(BeEmpty())
		}
		g.Expect(m.Network.Addresses[0].Public).To(BeFalse())
		g.Expect(m.Network.Addresses[1].Public).To(BeTrue())
		g.Expect(m.Network.Addresses[2].AddressFamily).To(Equal(6))
		status, data = get(t, metadataClient(tc.src), md.URL+"/userdata")
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(string(data)).To(Equal(`{"ignition":{"version":"3.4.0"}}`))
	}
	_, data := get(t, metadataClient(a.IPAddresses[0].Address), md.URL+"/metadata")
	g.Expect(string(data)).To(ContainSubstring(`"customdata":{"cluster":"a"}`))

	// An elastic address assigned to a device is the device's too.
	var res equinixapi.IPReservation
	e.call("POST", "/metal/v1/projects/"+e.project+"/ips", equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 1, Metro: "da"}, &res)
	e.call("POST", "/metal/v1/devices/"+a.ID+"/ips", equinixapi.IPAssignmentInput{Address: res.Address}, nil)
	status, data = get(t, metadataClient(res.Address), md.URL+"/metadata")
	g.Expect(status).To(Equal(http.StatusOK))
	var m equinixapi.Metadata
	g.Expect(json.Unmarshal(data, &m)).To(Succeed())
	g.Expect(m.Hostname).To(Equal("md-a"))
	g.Expect(m.Network.Addresses).To(HaveLen(4))

	for _, src := range []string{"127.0.0.1", "127.64.9.9"} {
		var er equinixapi.ErrorResponse
		status, data := get(t, metadataClient(src), md.URL+"/metadata")
		g.Expect(status).To(Equal(http.StatusNotFound), src)
		g.Expect(json.Unmarshal(data, &er)).To(Succeed())
		g.Expect(er.Error).NotTo(BeEmpty())
	}
}

// TestLedger: everything created shows in the ledger (and at /_ledger)
// with its tags; after every device is deleted and every reservation
// released it is empty.
func TestLedger(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, Options{})
	d0 := e.create("l-0", "cluster:l")
	d1 := e.create("l-1", "cluster:l", "role:worker")
	e.clock.Step(time.Hour)
	var res equinixapi.IPReservation
	e.call("POST", "/metal/v1/projects/"+e.project+"/ips", equinixapi.IPReservationRequest{Type: equinixapi.IPTypePublicIPv4, Quantity: 2, Metro: "da", Tags: []string{"eip:api"}}, &res)
	var a equinixapi.IPAssignment
	e.call("POST", "/metal/v1/devices/"+d0.ID+"/ips", equinixapi.IPAssignmentInput{Address: res.Address}, &a)

	var l Ledger
	status, _ := e.callAs("", "GET", "/_ledger", nil, &l)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(l.Devices).To(HaveLen(2))
	g.Expect(l.Devices[0].Hostname).To(Equal("l-0"))
	g.Expect(l.Devices[0].Addresses).To(HaveLen(4))
	g.Expect(l.IPReservations).To(HaveLen(1))
	g.Expect(l.IPReservations[0].Block).To(Equal("127.66.0.0/31"))
	g.Expect(l.IPReservations[0].Assignments).To(Equal([]LedgerAssignment{{ID: a.ID, Address: "127.66.0.0/32", Device: d0.ID}}))
	g.Expect(l.Tags).To(Equal([]string{"cluster:l", "eip:api", "role:worker"}))
	g.Expect(l.Empty()).To(BeFalse())
	// The request counts, at /_requests, as Requests says them.
	var counts map[string]int
	status, _ = e.callAs("", "GET", "/_requests", nil, &counts)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(counts).To(HaveKeyWithValue("POST /metal/v1/projects/{id}/devices", 2))
	g.Expect(counts).To(Equal(e.s.Requests()))

	for _, id := range []string{d0.ID, d1.ID} {
		status, _ := e.call("DELETE", "/metal/v1/devices/"+id+"?force_delete=true", nil, nil)
		g.Expect(status).To(Equal(http.StatusNoContent))
	}
	g.Expect(e.s.Ledger().Devices).To(HaveLen(2), "still deprovisioning")
	e.clock.Step(testTimings.Deprovisioning)
	status, _ = e.call("DELETE", "/metal/v1/ips/"+res.ID, nil, nil)
	g.Expect(status).To(Equal(http.StatusNoContent), "unassigned by the devices' delete")
	l = e.s.Ledger()
	g.Expect(l.Empty()).To(BeTrue(), "%+v", l)
	g.Expect(l.Tags).To(BeEmpty())
	status, _ = e.call("DELETE", "/metal/v1/projects/"+e.project, nil, nil)
	g.Expect(status).To(Equal(http.StatusNoContent))
}
