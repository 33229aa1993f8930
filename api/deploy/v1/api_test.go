package deployapi

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var (
	testKey = []byte("0123456789abcdef")
	testNow = time.Unix(1_800_000_000, 0)
)

func TestTickets(t *testing.T) {
	g := NewWithT(t)
	exp := testNow.Add(time.Hour)
	tk := SignTicket(testKey, "ns~a~1", "0a1b2c3d4e5f6a7b", exp)
	g.Expect(tk).To(HavePrefix("0a1b2c3d4e5f6a7b.1800003600."))
	gen, err := VerifyTicket(testKey, "ns~a~1", tk, testNow)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gen).To(Equal("0a1b2c3d4e5f6a7b"))
	_, err = VerifyTicket(testKey, "ns~a~1", tk, exp)
	g.Expect(err).NotTo(HaveOccurred(), "valid through its expiry second")

	for name, bad := range map[string]func() error{
		"other host": func() error { _, err := VerifyTicket(testKey, "ns~b~1", tk, testNow); return err },
		"expired":    func() error { _, err := VerifyTicket(testKey, "ns~a~1", tk, exp.Add(time.Second)); return err },
		"other key":  func() error { _, err := VerifyTicket([]byte("another key"), "ns~a~1", tk, testNow); return err },
		"later expiry, same signature": func() error {
			p := strings.Split(tk, ".")
			_, err := VerifyTicket(testKey, "ns~a~1", p[0]+".1900000000."+p[2], testNow)
			return err
		},
		"other generation, same signature": func() error {
			_, err := VerifyTicket(testKey, "ns~a~1", "ffff"+tk[4:], testNow)
			return err
		},
		"non-canonical expiry": func() error {
			_, err := VerifyTicket(testKey, "ns~a~1", strings.Replace(tk, ".1800003600.", ".+1800003600.", 1), testNow)
			return err
		},
		"garbage": func() error { _, err := VerifyTicket(testKey, "ns~a~1", "garbage", testNow); return err },
		"a generation that cannot be one": func() error {
			_, err := VerifyTicket(testKey, "ns~a~1", SignTicket(testKey, "ns~a~1", "a.b", exp), testNow)
			return err
		},
	} {
		g.Expect(bad()).To(MatchError(ErrBadToken), name)
	}
	gen, exp2, err := ParseTicket(tk)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gen).To(Equal("0a1b2c3d4e5f6a7b"))
	g.Expect(exp2).To(BeTemporally("==", exp))
}

func TestAgentTokens(t *testing.T) {
	g := NewWithT(t)
	tok, hash, err := NewAgentToken()
	g.Expect(err).NotTo(HaveOccurred())
	tok2, hash2, err := NewAgentToken()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tok).NotTo(Equal(tok2))
	g.Expect(len(tok)).To(BeNumerically(">=", 43), "256 random bits")
	g.Expect(hash).To(Equal(HashAgentToken(tok)))
	g.Expect(hash).NotTo(ContainSubstring(tok))
	g.Expect(AgentTokenMatches(tok, hash)).To(BeTrue())
	g.Expect(AgentTokenMatches(tok2, hash)).To(BeFalse(), "another request's token")
	g.Expect(AgentTokenMatches(tok, hash2)).To(BeFalse())
	g.Expect(AgentTokenMatches(hash, hash)).To(BeFalse(), "the hash is not the token")
	g.Expect(AgentTokenMatches("", HashAgentToken(""))).To(BeFalse(), "no token")
	g.Expect(AgentTokenMatches(tok, "")).To(BeFalse(), "no hash")
}

func TestHostURLs(t *testing.T) {
	g := NewWithT(t)
	exp := testNow.Add(time.Hour)
	q := SignHostURLQuery(testKey, "/images/deploy.iso", "ns~a~1", "0a1b", exp)
	g.Expect(q).To(HavePrefix("host=ns~a~1&gen=0a1b&expires=1800003600&signature="))
	v, err := url.ParseQuery(q)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := VerifyHostURL(testKey, "/images/deploy.iso", v, testNow)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(HostURL{HostID: "ns~a~1", Generation: "0a1b", Expiry: exp}))

	_, err = VerifyHostURL(testKey, "/images/deploy-host.img", v, testNow)
	g.Expect(err).To(MatchError(ErrBadToken), "another path")
	_, err = VerifyHostURL(testKey, "/images/deploy.iso", v, exp.Add(time.Second))
	g.Expect(err).To(MatchError(ErrBadToken), "expired")
	for key, value := range map[string]string{"host": "ns~b~1", "gen": "0a1c", "expires": "1900000000"} {
		w := url.Values{}
		for k := range v {
			w.Set(k, v.Get(k))
		}
		w.Set(key, value)
		_, err = VerifyHostURL(testKey, "/images/deploy.iso", w, testNow)
		g.Expect(err).To(MatchError(ErrBadToken), key)
	}
	// A discovery image's URL signature is no deploy image's.
	w, _ := url.ParseQuery(SignURLQuery(testKey, "/images/deploy.iso", "ns~a~1", exp))
	w.Set("gen", "0a1b")
	_, err = VerifyHostURL(testKey, "/images/deploy.iso", w, testNow)
	g.Expect(err).To(MatchError(ErrBadToken))
}

func TestURLs(t *testing.T) {
	g := NewWithT(t)
	exp := testNow.Add(time.Hour)
	v, _ := url.ParseQuery(SignURLQuery(testKey, "/images/x/discovery.iso", "uid.digest", exp))
	g.Expect(VerifyURL(testKey, "/images/x/discovery.iso", v.Get("host"), v.Get("expires"), v.Get("signature"), testNow)).To(Succeed())
	g.Expect(VerifyURL(testKey, "/images/x/discovery.iso", "uid.other", v.Get("expires"), v.Get("signature"), testNow)).To(MatchError(ErrBadToken))
	g.Expect(VerifyURL(testKey, "/images/x/discovery.iso", v.Get("host"), v.Get("expires"), v.Get("signature"), exp.Add(time.Second))).To(MatchError(ErrBadToken))
}

func TestLookupTokens(t *testing.T) {
	g := NewWithT(t)
	exp := testNow.Add(7 * 24 * time.Hour)
	tok := SignLookupToken(testKey, "/images/x/discovery.iso", exp)
	g.Expect(VerifyLookupToken(testKey, "/images/x/discovery.iso", tok, testNow)).To(Succeed())
	g.Expect(VerifyLookupToken(testKey, "/images/x/discovery.iso", tok, exp)).To(Succeed())
	g.Expect(VerifyLookupToken(testKey, "/images/x/discovery.iso", tok, exp.Add(time.Second))).To(MatchError(ErrBadToken), "expires with the image")
	g.Expect(VerifyLookupToken(testKey, "/images/y/discovery.iso", tok, testNow)).To(MatchError(ErrBadToken), "another image")
	g.Expect(VerifyLookupToken(testKey, "", SignLookupToken(testKey, "", exp), testNow)).To(MatchError(ErrBadToken), "no scope")
	_, sig, _ := strings.Cut(tok, ".")
	g.Expect(VerifyLookupToken(testKey, "/images/x/discovery.iso", "9999999999."+sig, testNow)).To(MatchError(ErrBadToken), "a later expiry")
	g.Expect(VerifyLookupToken(testKey, "/images/x/discovery.iso", sig, testNow)).To(MatchError(ErrBadToken), "the old, unexpiring form")
}

func TestHostID(t *testing.T) {
	g := NewWithT(t)
	id := HostID("ns", "host-0", "0c6b3e9a-1234-4000-8000-000000000001")
	g.Expect(id).To(Equal("ns~host-0~0c6b3e9a1234"))
	ns, name, uid, err := ParseHostID(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{ns, name, uid}).To(Equal([]string{"ns", "host-0", "0c6b3e9a1234"}))
	for _, bad := range []string{"nope", "ns~~1", "~n~1", "ns~n~1~2", "ns~n~0c6b3e9a12345", "ns~n~0c6b-3e"} {
		_, _, _, err = ParseHostID(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

// FuzzVerifyTicket checks what the token exchange relies on: a ticket
// signed for (key, host, generation, expiry) verifies, for that generation,
// until the expiry and for nothing else (not another host, generation or
// key, not later, not with any byte changed); and a ticket the fuzzer makes
// up verifies only if it is exactly what SignTicket makes.
func FuzzVerifyTicket(f *testing.F) {
	f.Add([]byte("k"), "ns~a~1", "ns~b~1", "0a1b2c3d4e5f6a7b", "0a1b2c3d4e5f6a7c", int64(1_800_003_600), int64(1_800_000_000), uint(0), byte(1),
		"0a1b2c3d4e5f6a7b.1800003600.abc")
	f.Fuzz(func(t *testing.T, key []byte, host, other, gen, otherGen string, expiry, now int64, at uint, flip byte, ticket string) {
		exp, at0 := time.Unix(expiry, 0), time.Unix(now, 0)
		signed := SignTicket(key, host, gen, exp)
		got, err := VerifyTicket(key, host, signed, at0)
		switch {
		case ValidGeneration(gen) && now <= expiry && (err != nil || got != gen):
			t.Fatalf("a ticket for %q, request %q, valid until %d, is refused at %d (%v) or read as %q", host, gen, expiry, now, err, got)
		case (!ValidGeneration(gen) || now > expiry) && err == nil:
			t.Fatalf("ticket %q is accepted at %d", signed, now)
		}
		if other != host {
			if _, err := VerifyTicket(key, other, signed, exp); err == nil {
				t.Fatalf("a ticket for %q is accepted for %q", host, other)
			}
		}
		if otherGen != gen && SignTicket(key, host, otherGen, exp) == signed {
			t.Fatalf("requests %q and %q have the same ticket", gen, otherGen)
		}
		if _, err := VerifyTicket(append(bytes.Clone(key), 'x'), host, signed, exp); err == nil {
			t.Fatalf("a ticket signed with key %q is accepted under another key", key)
		}
		if flip != 0 {
			b := []byte(signed)
			b[at%uint(len(b))] ^= flip
			if _, err := VerifyTicket(key, host, string(b), exp); err == nil {
				t.Fatalf("ticket %q changed to %q is accepted", signed, b)
			}
		}
		// Any ticket: no panic, and accepted only as SignTicket makes it.
		if g, err := VerifyTicket(key, host, ticket, at0); err == nil {
			pg, pexp, perr := ParseTicket(ticket)
			if perr != nil || pg != g || SignTicket(key, host, g, pexp) != ticket || now > pexp.Unix() {
				t.Fatalf("ticket %q for %q is accepted but is not one SignTicket makes", ticket, host)
			}
		}
	})
}

// FuzzVerifyHostURL: a deploy image URL verifies for exactly the path,
// host, request and expiry it was signed for, and a made-up query only if
// it carries what SignHostURLQuery makes.
func FuzzVerifyHostURL(f *testing.F) {
	f.Add([]byte("k"), "/images/deploy.iso", "/images/deploy-host.img", "ns~a~1", "0a1b", int64(1_800_003_600), int64(1_800_000_000), uint(3), byte(1),
		"host=ns~a~1&gen=0a1b&expires=1800003600&signature=abc")
	f.Fuzz(func(t *testing.T, key []byte, path, otherPath, host, gen string, expiry, now int64, at uint, flip byte, rawQuery string) {
		exp, at0 := time.Unix(expiry, 0), time.Unix(now, 0)
		q := SignHostURLQuery(key, path, host, gen, exp)
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatalf("SignHostURLQuery made %q, which does not parse: %v", q, err)
		}
		got, err := VerifyHostURL(key, path, v, at0)
		ok := ValidGeneration(gen) && host != "" && now <= expiry
		if ok && (err != nil || got != (HostURL{HostID: host, Generation: gen, Expiry: exp})) {
			t.Fatalf("URL %q for %q is refused (%v) or read as %+v", q, path, err, got)
		}
		if !ok && err == nil {
			t.Fatalf("URL %q is accepted at %d", q, now)
		}
		if otherPath != path {
			if _, err := VerifyHostURL(key, otherPath, v, exp); err == nil {
				t.Fatalf("a URL for %q is accepted for %q", path, otherPath)
			}
		}
		if flip != 0 && v.Get("signature") != "" {
			sig := []byte(v.Get("signature"))
			sig[at%uint(len(sig))] ^= flip
			v.Set("signature", string(sig))
			if _, err := VerifyHostURL(key, path, v, exp); err == nil {
				t.Fatalf("a changed signature %q is accepted", sig)
			}
		}
		w, _ := url.ParseQuery(rawQuery)
		if got, err := VerifyHostURL(key, path, w, at0); err == nil {
			want, _ := url.ParseQuery(SignHostURLQuery(key, path, got.HostID, got.Generation, got.Expiry))
			for _, k := range []string{"host", "gen", "expires", "signature"} {
				if w.Get(k) != want.Get(k) {
					t.Fatalf("query %q is accepted but its %s is not what SignHostURLQuery makes", rawQuery, k)
				}
			}
		}
	})
}

// FuzzVerifyURL: a discovery image URL verifies for exactly the path,
// subject and expiry it was signed for.
func FuzzVerifyURL(f *testing.F) {
	f.Add([]byte("k"), "/images/u/discovery.iso", "u.digest", "u.other", int64(1_800_003_600), int64(1_800_000_000), "1800003600", "abc")
	f.Fuzz(func(t *testing.T, key []byte, path, subject, other string, expiry, now int64, expires, signature string) {
		v, err := url.ParseQuery(SignURLQuery(key, path, subject, time.Unix(expiry, 0)))
		if err != nil || v.Get("host") != subject {
			t.Fatalf("SignURLQuery does not carry subject %q: %v", subject, err)
		}
		err = VerifyURL(key, path, subject, v.Get("expires"), v.Get("signature"), time.Unix(now, 0))
		if (now <= expiry) != (err == nil) {
			t.Fatalf("a URL valid until %d, checked at %d: %v", expiry, now, err)
		}
		if other != subject && VerifyURL(key, path, other, v.Get("expires"), v.Get("signature"), time.Unix(expiry, 0)) == nil {
			t.Fatalf("a URL for %q is accepted for %q", subject, other)
		}
		if VerifyURL(key, path, subject, expires, signature, time.Unix(now, 0)) == nil {
			exp, ok := parseExpiry(expires)
			w, _ := url.ParseQuery(SignURLQuery(key, path, subject, exp))
			if !ok || now > exp.Unix() || w.Get("signature") != signature || w.Get("expires") != expires {
				t.Fatalf("signature %q, expiry %q are accepted at %d but are not what SignURLQuery makes", signature, expires, now)
			}
		}
	})
}

// FuzzVerifyLookupToken: a lookup credential verifies for its image's
// scope until its expiry, and a made-up one only as SignLookupToken makes it.
func FuzzVerifyLookupToken(f *testing.F) {
	f.Add([]byte("k"), "/images/u/discovery.iso", "/images/v/discovery.iso", int64(1_800_003_600), int64(1_800_000_000), "1800003600.abc")
	f.Fuzz(func(t *testing.T, key []byte, scope, other string, expiry, now int64, token string) {
		exp, at0 := time.Unix(expiry, 0), time.Unix(now, 0)
		signed := SignLookupToken(key, scope, exp)
		err := VerifyLookupToken(key, scope, signed, at0)
		if (scope != "" && now <= expiry) != (err == nil) {
			t.Fatalf("lookup credential %q for %q valid until %d, checked at %d: %v", signed, scope, expiry, now, err)
		}
		if other != scope && VerifyLookupToken(key, other, signed, exp) == nil {
			t.Fatalf("a credential for %q is accepted for %q", scope, other)
		}
		if VerifyLookupToken(key, scope, token, at0) == nil {
			e, _, _ := strings.Cut(token, ".")
			exp, ok := parseExpiry(e)
			if !ok || SignLookupToken(key, scope, exp) != token || now > exp.Unix() {
				t.Fatalf("credential %q is accepted but is not one SignLookupToken makes", token)
			}
		}
	})
}

// FuzzAgentToken: a token matches its own hash and no other token's.
func FuzzAgentToken(f *testing.F) {
	f.Add("dG9rZW4", "b3RoZXI", "")
	f.Fuzz(func(t *testing.T, token, other, hash string) {
		h := HashAgentToken(token)
		if AgentTokenMatches(token, h) != (token != "") {
			t.Fatalf("token %q against its own hash", token)
		}
		if other != token && AgentTokenMatches(other, h) {
			t.Fatalf("token %q matches the hash of %q", other, token)
		}
		if AgentTokenMatches(token, hash) && hash != h {
			t.Fatalf("token %q matches hash %q, not its own %q", token, hash, h)
		}
	})
}

// FuzzParseHostID: HostID and ParseHostID round-trip, and whatever
// ParseHostID accepts is a HostID.
func FuzzParseHostID(f *testing.F) {
	f.Add("ns", "host-0", "0c6b3e9a-1234-4000-8000-000000000001", "ns~host-0~0c6b3e9a1234")
	f.Add("a", "b", "", "a~b~")
	f.Fuzz(func(t *testing.T, ns, name, uid, id string) {
		if gotNS, gotName, prefix, err := ParseHostID(id); err == nil && HostID(gotNS, gotName, prefix) != id {
			t.Fatalf("ParseHostID(%q) = %q, %q, %q: not the host ID's parts", id, gotNS, gotName, prefix)
		}
		if ns == "" || name == "" || strings.Contains(ns+name, "~") {
			return
		}
		hid := HostID(ns, name, uid)
		gotNS, gotName, prefix, err := ParseHostID(hid)
		if !validUIDPrefix(strings.ReplaceAll(uid, "-", "")[:min(12, len(strings.ReplaceAll(uid, "-", "")))]) {
			if err == nil {
				t.Fatalf("host ID %q of UID %q parses", hid, uid)
			}
			return
		}
		if err != nil || gotNS != ns || gotName != name || HostID(gotNS, gotName, prefix) != hid {
			t.Fatalf("HostID(%q, %q, %q) = %q does not round-trip: %q, %q, %q, %v", ns, name, uid, hid, gotNS, gotName, prefix, err)
		}
	})
}
