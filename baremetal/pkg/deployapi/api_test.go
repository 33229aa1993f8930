package deployapi

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestTokens(t *testing.T) {
	g := NewWithT(t)
	key := []byte("k")
	now := time.Unix(1_800_000_000, 0)
	tok := SignToken(key, "ns~a~1", now.Add(time.Hour))
	g.Expect(VerifyToken(key, "ns~a~1", tok, now)).To(Succeed())
	g.Expect(VerifyToken(key, "ns~b~1", tok, now)).To(MatchError(ErrBadToken), "per host")
	g.Expect(VerifyToken(key, "ns~a~1", tok, now.Add(2*time.Hour))).To(MatchError(ErrBadToken), "expires")
	g.Expect(VerifyToken([]byte("other"), "ns~a~1", tok, now)).To(MatchError(ErrBadToken), "keyed")
	g.Expect(VerifyToken(key, "ns~a~1", "garbage", now)).To(MatchError(ErrBadToken))

	q := SignURLQuery(key, "/images/deploy.iso", "ns~a~1", now.Add(time.Hour))
	g.Expect(q).To(ContainSubstring("host=ns~a~1"))
}

func TestHostID(t *testing.T) {
	g := NewWithT(t)
	id := HostID("ns", "host-0", "0c6b3e9a-1234-4000-8000-000000000001")
	g.Expect(id).To(Equal("ns~host-0~0c6b3e9a1234"))
	ns, name, uid, err := ParseHostID(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{ns, name, uid}).To(Equal([]string{"ns", "host-0", "0c6b3e9a1234"}))
	_, _, _, err = ParseHostID("nope")
	g.Expect(err).To(HaveOccurred())
}

func FuzzVerifyToken(f *testing.F) {
	f.Add("ns~a~1", "123.abc")
	f.Fuzz(func(t *testing.T, host, tok string) {
		_ = VerifyToken([]byte("k"), host, tok, time.Unix(0, 0))
	})
}
