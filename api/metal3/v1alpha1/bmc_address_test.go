package v1alpha1

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseBMCAddress(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    BMCAddress
		wantErr string
	}{
		{name: "redfish", in: "redfish://10.0.0.5/redfish/v1/Systems/1",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "https://10.0.0.5", SystemPath: "/redfish/v1/Systems/1"}},
		{name: "redfish over http", in: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/a",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "http://127.0.0.1:8000", SystemPath: "/redfish/v1/Systems/a"}},
		{name: "redfish service root only", in: "redfish+https://bmc.example.com/redfish/v1/",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "https://bmc.example.com"}},
		{name: "virtual media", in: "redfish-virtualmedia://10.0.0.5:8443/redfish/v1/Systems/1/",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "https://10.0.0.5:8443", SystemPath: "/redfish/v1/Systems/1", VirtualMedia: true}},
		{name: "idrac virtual media over http, IPv6", in: "idrac-virtualmedia+http://[::1]:8000/redfish/v1/Systems/System.Embedded.1",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "http://[::1]:8000", SystemPath: "/redfish/v1/Systems/System.Embedded.1", VirtualMedia: true}},
		{name: "ilo5 virtual media", in: "ilo5-virtualmedia://ilo/redfish/v1/Systems/1",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "https://ilo", SystemPath: "/redfish/v1/Systems/1", VirtualMedia: true}},
		{name: "scheme case", in: "REDFISH://h/redfish/v1/Systems/1",
			want: BMCAddress{Driver: BMCDriverRedfish, Endpoint: "https://h", SystemPath: "/redfish/v1/Systems/1"}},
		{name: "ipmi default port", in: "ipmi://10.0.0.6", want: BMCAddress{Driver: BMCDriverIPMI, Endpoint: "10.0.0.6:623"}},
		{name: "ipmi port", in: "ipmi://10.0.0.6:6230", want: BMCAddress{Driver: BMCDriverIPMI, Endpoint: "10.0.0.6:6230"}},
		{name: "ipmi IPv6", in: "ipmi://[fd00::6]", want: BMCAddress{Driver: BMCDriverIPMI, Endpoint: "[fd00::6]:623"}},
		{name: "no scheme", in: "10.0.0.6", wantErr: "is not a URL"},
		{name: "empty", in: "", wantErr: "is not a URL"},
		{name: "no host", in: "redfish:///redfish/v1/Systems/1", wantErr: "is not a URL"},
		{name: "bad port", in: "ipmi://h:port", wantErr: "is not a URL"},
		{name: "ftp", in: "ftp://x", wantErr: `unsupported scheme "ftp"; supported schemes are idrac-virtualmedia, ilo5-virtualmedia, ipmi, redfish, redfish-virtualmedia`},
		{name: "libvirt", in: "libvirt://10.0.0.6", wantErr: "unsupported scheme"},
		{name: "ipmi with a transport", in: "ipmi+http://h", wantErr: "ipmi takes no transport"},
		{name: "ftp transport", in: "redfish+ftp://10.0.0.6", wantErr: `unsupported transport "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseBMCAddress(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				var e *BMCAddressError
				g.Expect(err).To(BeAssignableToTypeOf(e))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestValidateBMCAddressField(t *testing.T) {
	path := field.NewPath("platform", "baremetal", "hosts").Index(2).Child("bmc", "address")
	tests := []struct {
		name       string
		in         string
		wantDetail string
		wantValue  string
	}{
		{name: "valid", in: "redfish-virtualmedia://10.0.0.1/redfish/v1/Systems/1"},
		{name: "valid ipmi", in: "ipmi://10.0.0.1"},
		{name: "scheme", in: "ftp://x", wantDetail: `unsupported scheme "ftp"`, wantValue: "ftp://x"},
		{name: "password in the address", in: "redfish://admin:canary-bmc-password-1@10.0.0.1/redfish/v1/Systems/1",
			wantDetail: "must not carry a username or password", wantValue: "redfish://redacted@10.0.0.1/redfish/v1/Systems/1"},
		{name: "password in an address that does not parse", in: "ipmi://admin:canary-bmc-password-1@h:port/x",
			wantDetail: "is not a URL", wantValue: "ipmi://redacted@h:port/x"},
		{name: "password with a bad scheme", in: "ftp://admin:canary-bmc-password-1@h",
			wantDetail: "unsupported scheme", wantValue: "ftp://redacted@h"},
		{name: "no scheme: user:password@host reads as an opaque URL", in: "admin:canary-bmc-password-1@10.0.0.1",
			wantDetail: "is not a URL", wantValue: "redacted@10.0.0.1"},
		{name: "a password with a slash: no parser reads it as a password", in: "redfish://admin:1/canary-bmc-password-1@10.0.0.1/redfish/v1/Systems/1",
			wantDetail: `has an "@" in its path`, wantValue: "redfish://redacted@10.0.0.1/redfish/v1/Systems/1"},
		{name: "a password with a question mark", in: "ipmi://admin:623?canary-bmc-password-1@10.0.0.1",
			wantDetail: `has an "@" in its path, query or fragment`, wantValue: "ipmi://redacted@10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidateBMCAddressField(tt.in, path)
			if tt.wantDetail == "" {
				g.Expect(errs).To(BeEmpty())
				g.Expect(ValidateBMCAddress(tt.in)).To(Succeed())
				return
			}
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Field).To(Equal("platform.baremetal.hosts[2].bmc.address"))
			g.Expect(errs[0].Detail).To(ContainSubstring(tt.wantDetail))
			g.Expect(errs[0].BadValue).To(Equal(tt.wantValue))
			g.Expect(errs.ToAggregate().Error()).NotTo(ContainSubstring("canary"), "no password in the message")
			g.Expect(ValidateBMCAddress(tt.in)).To(HaveOccurred())
		})
	}
}

func TestRedactBMCAddress(t *testing.T) {
	for in, want := range map[string]string{
		"redfish://10.0.0.1/redfish/v1/Systems/1":    "redfish://10.0.0.1/redfish/v1/Systems/1",
		"redfish://u:pw@10.0.0.1/redfish/v1/Systems": "redfish://redacted@10.0.0.1/redfish/v1/Systems",
		"ipmi://u:p@w@h:623":                         "ipmi://redacted@h:623",
		"ipmi://h/path@not-userinfo":                 "ipmi://redacted@not-userinfo",
		"ipmi://u:pw@h?q@x":                          "ipmi://redacted@x",
		"//u:pw@h":                                   "//redacted@h",
		"u:pw@h/x":                                   "redacted@h/x",
		"0000#://u:pw@0":                             "redacted@0",
		"redfish://u@h":                              "redfish://redacted@h",
		"redfish://u:1/pw@h/redfish/v1/Systems/1":    "redfish://redacted@h/redfish/v1/Systems/1",
		"redfish://u:p?w@h":                          "redfish://redacted@h",
		"redfish://u:p#w@h":                          "redfish://redacted@h",
		"not a URL at all":                           "not a URL at all",
	} {
		NewWithT(t).Expect(RedactBMCAddress(in)).To(Equal(want), in)
	}
}

// TestPasswordsWithURLDelimiters: a password holding a character that ends
// a URL's authority ("/", "?", "#") or "@" itself shows nowhere: not in
// RedactBMCAddress, BMCAddressWithoutUserinfo, ParseBMCAddress's error or
// the webhook's field error, whatever part of the URL it lands in.
func TestPasswordsWithURLDelimiters(t *testing.T) {
	const secret = "Zq7xK"
	for _, pw := range []string{
		"a/" + secret, secret + "/b", "a?" + secret, secret + "?b", "a#" + secret, secret + "#b", "a@" + secret, secret + "@b",
		"1/" + secret, "1?" + secret, "1#" + secret, "80/" + secret + "@x", secret + "%zz", "a/" + secret + "?c#d@e",
	} {
		for _, address := range []string{
			"redfish://admin:" + pw + "@10.0.0.1/redfish/v1/Systems/1",
			"ipmi://admin:" + pw + "@10.0.0.1:623",
			"redfish-virtualmedia+http://admin:" + pw + "@bmc.example.com",
			"admin:" + pw + "@10.0.0.1",
		} {
			t.Run(address, func(t *testing.T) {
				g := NewWithT(t)
				g.Expect(RedactBMCAddress(address)).NotTo(ContainSubstring(secret))
				g.Expect(BMCAddressWithoutUserinfo(address)).NotTo(ContainSubstring(secret))
				_, err := ParseBMCAddress(address)
				if err != nil {
					g.Expect(err.Error()).NotTo(ContainSubstring(secret))
				}
				errs := ValidateBMCAddressField(address, field.NewPath("spec", "bmc", "address"))
				g.Expect(errs).NotTo(BeEmpty(), "an address with a password is refused")
				g.Expect(errs.ToAggregate().Error()).NotTo(ContainSubstring(secret))
				for _, e := range errs {
					g.Expect(e.BadValue).NotTo(ContainSubstring(secret))
				}
			})
		}
	}
}

func TestBMCSchemesParse(t *testing.T) {
	g := NewWithT(t)
	schemes := BMCSchemes()
	g.Expect(schemes).To(ContainElements("ipmi", "redfish", "redfish+http", "redfish+https", "redfish-virtualmedia",
		"idrac-virtualmedia+https", "ilo5-virtualmedia"))
	g.Expect(schemes).NotTo(ContainElement("ipmi+http"))
	for _, s := range schemes {
		_, err := ParseBMCAddress(s + "://h/redfish/v1/Systems/1")
		g.Expect(err).NotTo(HaveOccurred(), s)
	}
}

func FuzzParseBMCAddress(f *testing.F) {
	for _, s := range []string{"redfish://h/redfish/v1/Systems/1", "ipmi://h:1", "idrac-virtualmedia+http://[::1]:1/x",
		"redfish://u:p@h", "ipmi://u:p@h:x/y", "%%", "", "@", "admin:pw@10.0.0.1", "redfish://h#x@y", "0000#://x@0", "//h#://x"} {
		for _, around := range [][2]string{{"", ""}, {"1/", ""}, {"", "?x"}, {"a#", "@b"}, {"80", "/"}} {
			f.Add(s, around[0], around[1])
		}
	}
	f.Fuzz(func(t *testing.T, s, before, after string) {
		a, err := ParseBMCAddress(s)
		if err == nil && (a.Driver == "" || a.Endpoint == "") {
			t.Fatalf("%q parsed without a driver or endpoint: %+v", s, a)
		}
		// A password in the address, whatever characters surround the
		// marker in it, never reaches a message.
		const marker = "Zq7"
		if strings.Contains(s+before+after, marker) {
			return
		}
		pw := before + marker + after
		withCreds := "u:" + pw + "@" + s
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			withCreds = scheme + "://u:" + pw + "@" + rest
		}
		shown := []string{RedactBMCAddress(withCreds), BMCAddressWithoutUserinfo(withCreds)}
		if _, err := ParseBMCAddress(withCreds); err != nil {
			shown = append(shown, err.Error())
		}
		for _, e := range ValidateBMCAddressField(withCreds, field.NewPath("a")) {
			shown = append(shown, e.Error())
		}
		for _, m := range shown {
			if strings.Contains(m, marker) {
				t.Fatalf("%q: the password is in %q", withCreds, m)
			}
		}
	})
}
