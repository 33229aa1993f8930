package assistedapi_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
)

// TestHostProof: a proof says which host it is for until it expires, and
// is refused when forged, altered or expired.
func TestHostProof(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	want := assistedapi.HostProof{Namespace: "ztp", Name: "host-0", UID: "6f1c2b3a", Expires: now.Add(time.Hour)}
	proof := assistedapi.SignHostProof(hubKey, want)
	got, err := assistedapi.ParseHostProof(hubKey, proof, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	g.Expect(got.Host()).To(Equal("host-0/6f1c2b3a"))

	body, mac, _ := strings.Cut(proof[len("mhp1."):], ".")
	other := assistedapi.SignHostProof(hubKey, assistedapi.HostProof{Namespace: "other", Name: "host-0", UID: "6f1c2b3a", Expires: now.Add(time.Hour)})
	otherBody, _, _ := strings.Cut(other[len("mhp1."):], ".")
	for name, tc := range map[string]struct {
		proof string
		at    time.Time
	}{
		"expired":               {proof, now.Add(time.Hour)},
		"another key's":         {assistedapi.SignHostProof(otherKey, want), now},
		"another body":          {"mhp1." + otherBody + "." + mac, now},
		"no signature":          {"mhp1." + body, now},
		"a host credential":     {"mhk1." + body + "." + mac, now},
		"empty":                 {"", now},
		"without a host's name": {assistedapi.SignHostProof(hubKey, assistedapi.HostProof{Namespace: "ztp", UID: "x", Expires: now.Add(time.Hour)}), now},
	} {
		_, err := assistedapi.ParseHostProof(hubKey, tc.proof, tc.at)
		g.Expect(err).To(MatchError(assistedapi.ErrBadHostProof), name)
	}
}
