package assistedapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// TestParseInventory: an inventory is decoded with upstream's names
// (fields metalshift does not model are ignored, as upstream's agent sends
// many), and refused, with the reason, when over a limit or not one.
func TestParseInventory(t *testing.T) {
	g := NewWithT(t)
	inv, err := assistedapi.ParseInventory([]byte(`{"hostname":"master-0","cpu":{"count":8},"tpm_version":"2.0",
		"interfaces":[{"name":"eth0","mac_address":"52:54:00:00:00:01","ipv4_addresses":["192.0.2.1/24"]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Hostname).To(Equal("master-0"))
	g.Expect(inv.Interfaces).To(HaveLen(1))

	addrs := make([]string, assistedapi.MaxInventoryAddresses+1)
	many := func(v any) string { data, _ := json.Marshal(v); return string(data) }
	for name, tc := range map[string]struct{ in, want string }{
		"too large":  {`{"hostname":"` + strings.Repeat("a", assistedapi.MaxInventoryBytes) + `"}`, "65551 bytes, at most 65536"},
		"not JSON":   {`hostname`, "not an inventory: invalid character 'h' looking for beginning of value"},
		"a list":     {`[]`, "not an inventory: json: cannot unmarshal array into Go value of type assistedapi.Inventory"},
		"trailing":   {`{} x`, "not an inventory: data after the JSON object"},
		"interfaces": {many(assistedapi.Inventory{Interfaces: make([]assistedapi.Interface, 129)}), "129 interfaces, at most 128"},
		"routes":     {many(assistedapi.Inventory{Routes: make([]assistedapi.Route, 513)}), "513 routes, at most 512"},
		"addresses": {many(assistedapi.Inventory{Interfaces: []assistedapi.Interface{{Name: "eth0", IPV6Addresses: addrs}}}),
			`interface "eth0" has more than 64 addresses of a family`},
	} {
		_, err := assistedapi.ParseInventory([]byte(tc.in))
		g.Expect(err).To(MatchError(tc.want), name)
	}
}

// FuzzParseInventory: what is accepted is within every limit.
func FuzzParseInventory(f *testing.F) {
	f.Add([]byte(`{"hostname":"master-0","cpu":{"count":8},"disks":[{"path":"/dev/sda","size_bytes":1}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := assistedapi.ParseInventory(data)
		if err != nil {
			return
		}
		if len(data) > assistedapi.MaxInventoryBytes || len(inv.Interfaces) > assistedapi.MaxInventoryInterfaces ||
			len(inv.Disks) > assistedapi.MaxInventoryDisks || len(inv.Routes) > assistedapi.MaxInventoryRoutes ||
			len(inv.Hostname) > assistedapi.MaxHostnameLength {
			t.Fatalf("accepted an inventory over a limit: %d bytes", len(data))
		}
		for _, n := range inv.Interfaces {
			if len(n.IPV4Addresses) > assistedapi.MaxInventoryAddresses || len(n.IPV6Addresses) > assistedapi.MaxInventoryAddresses {
				t.Fatalf("accepted interface %q with too many addresses", n.Name)
			}
		}
	})
}
