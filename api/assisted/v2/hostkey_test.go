package assistedapi_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

var (
	hubKey   = []byte("the-hub-signing-key-of-32-bytes!")
	otherKey = []byte("another-signing-key-of-32-bytes!")
)

const (
	infraEnvID = "5e8a4d5c-7b1e-4c1e-9f7a-3c1d2e3f4a5b"
	hostID     = "0c6b3e9a-2f4d-4b8e-9a1c-7d5e6f708192"
)

// TestHostKey: a credential names its InfraEnv and host, is new at every
// mint, and is refused when forged, altered, truncated or signed with
// another key.
func TestHostKey(t *testing.T) {
	g := NewWithT(t)
	cred, err := assistedapi.NewHostKey(hubKey, infraEnvID, hostID)
	g.Expect(err).NotTo(HaveOccurred())
	ie, host, err := assistedapi.ParseHostKey(hubKey, cred)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{ie, host}).To(Equal([]string{infraEnvID, hostID}))
	again, err := assistedapi.NewHostKey(hubKey, infraEnvID, hostID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).NotTo(Equal(cred))
	g.Expect(assistedapi.HostKeyHash(again)).NotTo(Equal(assistedapi.HostKeyHash(cred)))
	g.Expect(assistedapi.HostKeyHash(cred)).To(MatchRegexp("^[0-9a-f]{64}$"))

	other, err := assistedapi.NewHostKey(otherKey, infraEnvID, hostID)
	g.Expect(err).NotTo(HaveOccurred())
	parts := strings.Split(cred, ".")
	for name, bad := range map[string]string{
		"empty":               "",
		"another key's":       other,
		"the InfraEnv key":    assistedapi.SignAgentToken(hubKey, infraEnvID),
		"no signature":        strings.Join(parts[:4], "."),
		"another host":        strings.Replace(cred, hostID, "1d7c4f0b-3a5e-4c9f-8b2d-8e6f7a819203", 1),
		"another nonce":       strings.Join([]string{parts[0], parts[1], parts[2], "AAAA", parts[4]}, "."),
		"another version":     "mhk2" + strings.TrimPrefix(cred, "mhk1"),
		"an extra field":      strings.Join([]string{parts[0], parts[1], parts[2], parts[3], "x", parts[4]}, "."),
		"truncated signature": cred[:len(cred)-1],
		"too long":            cred + strings.Repeat("A", 256),
	} {
		_, _, err := assistedapi.ParseHostKey(hubKey, bad)
		g.Expect(err).To(MatchError(assistedapi.ErrBadHostKey), name)
	}
}

// FuzzParseHostKey: whatever is accepted names what it was signed for,
// with the hub's key and no other.
func FuzzParseHostKey(f *testing.F) {
	cred, err := assistedapi.NewHostKey(hubKey, infraEnvID, hostID)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cred)
	f.Add("mhk1.a.b.c.d")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		ie, host, err := assistedapi.ParseHostKey(hubKey, s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(s, "mhk1."+ie+"."+host+".") || ie == "" || host == "" || len(s) > 256 {
			t.Fatalf("accepted %q as infra env %q host %q", s, ie, host)
		}
		if _, _, err := assistedapi.ParseHostKey(otherKey, s); err == nil {
			t.Fatalf("%q is accepted with two keys", s)
		}
	})
}
