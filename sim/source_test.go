package sim

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMachineCallsFromItsAddress: a lab machine's calls (its agents', its
// BMC's virtual media reads) come from the machine's own address, each
// machine's from its own, as the hub's per-source budgets expect of a
// fleet.
func TestMachineCallsFromItsAddress(t *testing.T) {
	var seen []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		seen = append(seen, host)
	}))
	defer s.Close()
	f := &Firmware{HTTP: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	m0, m1 := NewMachine("src", 0, "127.78.250", 0x71, 1<<30), NewMachine("src", 1, "127.78.250", 0x71, 1<<30)
	for _, c := range []*http.Client{f.machineHTTP(m0, f.HTTP), f.machineHTTP(m1, f.HTTP), f.fromMachine(m0, f.HTTP)} {
		resp, err := c.Get(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	want := []string{m0.Hardware.NICs[0].IP, m1.Hardware.NICs[0].IP, m0.Hardware.NICs[0].IP}
	if len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("calls came from %v, want %v", seen, want)
	}
	if want[0] == want[1] {
		t.Fatalf("two machines with one address %s", want[0])
	}
}
