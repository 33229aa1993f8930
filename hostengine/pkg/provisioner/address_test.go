package provisioner

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in      string
		want    Address
		wantErr string
	}{
		{in: "redfish://10.0.0.5/redfish/v1/Systems/1", want: Address{Driver: DriverRedfish, Endpoint: "https://10.0.0.5", SystemPath: "/redfish/v1/Systems/1"}},
		{in: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/a", want: Address{Driver: DriverRedfish, Endpoint: "http://127.0.0.1:8000", SystemPath: "/redfish/v1/Systems/a"}},
		{in: "redfish+https://bmc.example.com", want: Address{Driver: DriverRedfish, Endpoint: "https://bmc.example.com"}},
		{in: "redfish-virtualmedia://10.0.0.5:8443/redfish/v1/Systems/1/", want: Address{Driver: DriverRedfish, Endpoint: "https://10.0.0.5:8443", SystemPath: "/redfish/v1/Systems/1", VirtualMedia: true}},
		{in: "redfish-virtualmedia+http://[::1]:8000/redfish/v1/Systems/1", want: Address{Driver: DriverRedfish, Endpoint: "http://[::1]:8000", SystemPath: "/redfish/v1/Systems/1", VirtualMedia: true}},
		{in: "ipmi://10.0.0.6", want: Address{Driver: DriverIPMI, Endpoint: "10.0.0.6:623"}},
		{in: "ipmi://10.0.0.6:6230", want: Address{Driver: DriverIPMI, Endpoint: "10.0.0.6:6230"}},
		{in: "10.0.0.6", wantErr: "is not a URL"},
		{in: "libvirt://10.0.0.6", wantErr: "unsupported scheme"},
		{in: "redfish+ftp://10.0.0.6", wantErr: "unsupported transport"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseAddress(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"redfish://h/redfish/v1/Systems/1", "ipmi://h:1", "redfish-virtualmedia+http://[::1]:1/x", "%%", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err == nil && (a.Driver == "" || a.Endpoint == "") {
			t.Fatalf("%q parsed without a driver or endpoint: %+v", s, a)
		}
	})
}
