package deployapi

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
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

// FuzzVerifyToken checks what the deploy server relies on: a token signed
// for (key, host, expiry) verifies for that host until the expiry and for
// nothing else (not another host, not later, not with any byte changed, not
// under another key); and a token the fuzzer makes up verifies only if it is
// exactly what SignToken makes for that host and expiry.
func FuzzVerifyToken(f *testing.F) {
	f.Add([]byte("k"), "ns~a~1", "ns~b~1", int64(1_800_003_600), int64(1_800_000_000), uint(0), byte(1), "123.abc")
	f.Fuzz(func(t *testing.T, key []byte, host, other string, expiry, now int64, at uint, flip byte, tok string) {
		exp, at0 := time.Unix(expiry, 0), time.Unix(now, 0)
		signed := SignToken(key, host, exp)
		err := VerifyToken(key, host, signed, at0)
		if now <= expiry && err != nil {
			t.Fatalf("a token for %q valid until %d is refused at %d: %v", host, expiry, now, err)
		}
		if now > expiry && !errors.Is(err, ErrBadToken) {
			t.Fatalf("a token for %q that expired at %d is accepted at %d", host, expiry, now)
		}
		if other != host && VerifyToken(key, other, signed, time.Unix(expiry, 0)) == nil {
			t.Fatalf("a token for %q is accepted for %q", host, other)
		}
		if VerifyToken(append(bytes.Clone(key), 'x'), host, signed, exp) == nil {
			t.Fatalf("a token signed with key %q is accepted under another key", key)
		}
		if flip != 0 {
			b := []byte(signed)
			b[at%uint(len(b))] ^= flip
			if VerifyToken(key, host, string(b), exp) == nil {
				t.Fatalf("token %q changed to %q is accepted", signed, b)
			}
		}

		// Any token: no panic, and accepted only as SignToken makes it.
		if VerifyToken(key, host, tok, at0) == nil {
			e, _, _ := strings.Cut(tok, ".")
			unix, perr := strconv.ParseInt(e, 10, 64)
			if perr != nil || SignToken(key, host, time.Unix(unix, 0)) != tok {
				t.Fatalf("token %q for %q is accepted but is not one SignToken makes", tok, host)
			}
		}
	})
}
