package console

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		name, host, origin string
		want               bool
	}{
		{name: "same host and port", host: "127.0.0.1:8443", origin: "https://127.0.0.1:8443", want: true},
		{name: "behind a TLS-terminating proxy", host: "console.example.com", origin: "https://console.example.com", want: true},
		{name: "another site", host: "127.0.0.1:8443", origin: "https://evil.example", want: false},
		{name: "another port", host: "127.0.0.1:8443", origin: "https://127.0.0.1:9443", want: false},
		{name: "no Origin", host: "127.0.0.1:8443", origin: "", want: false},
		{name: "opaque origin", host: "127.0.0.1:8443", origin: "null", want: false},
		{name: "not a web origin", host: "127.0.0.1:8443", origin: "file://127.0.0.1:8443", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/signin", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			NewWithT(t).Expect(sameOrigin(r)).To(Equal(tt.want))
		})
	}
}

func TestSecureCookie(t *testing.T) {
	g := NewWithT(t)
	r := httptest.NewRequest("GET", "/", nil)
	g.Expect(secure(r)).To(BeFalse())
	r.Header.Set("X-Forwarded-Proto", "https")
	g.Expect(secure(r)).To(BeTrue())
	r = httptest.NewRequest("GET", "/", nil)
	r.TLS = &tls.ConnectionState{}
	g.Expect(secure(r)).To(BeTrue())
	g.Expect(cookie(nil, true).MaxAge).To(BeNumerically("<", 0), "sign-out clears the cookie")
}
