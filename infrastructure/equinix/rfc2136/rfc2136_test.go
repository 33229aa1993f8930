package rfc2136

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
)

// TestEnsure: Ensure writes api, api-int and *.apps of a cluster; again
// with the same records it changes nothing; with a new API address the
// names answer only the new one, and the ingress's records stay.
func TestEnsure(t *testing.T) {
	g := NewWithT(t)
	b := startBind(t)
	s := b.server()
	ctx := context.Background()
	api, ingress := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")

	g.Expect(s.Ensure(ctx, ClusterRecords("demo", "example.com", api, ingress, 60))).To(Succeed())
	b.expectAddrs(t, "api.demo.example.com.", "192.0.2.10")
	b.expectAddrs(t, "api-int.demo.example.com.", "192.0.2.10")
	b.expectAddrs(t, "some-route.apps.demo.example.com.", "192.0.2.11")
	b.expectAddrs(t, "console-openshift-console.apps.demo.example.com.", "192.0.2.11")

	g.Expect(s.Ensure(ctx, ClusterRecords("demo", "example.com", api, ingress, 60))).To(Succeed())
	b.expectAddrs(t, "api.demo.example.com.", "192.0.2.10")
	b.expectAddrs(t, "some-route.apps.demo.example.com.", "192.0.2.11")

	g.Expect(s.Ensure(ctx, ClusterRecords("demo", "example.com.", netip.MustParseAddr("192.0.2.20"), ingress, 60))).To(Succeed())
	b.expectAddrs(t, "api.demo.example.com.", "192.0.2.20")
	b.expectAddrs(t, "api-int.demo.example.com.", "192.0.2.20")
	b.expectAddrs(t, "some-route.apps.demo.example.com.", "192.0.2.11")

	// Names relative to the zone, several addresses for one name, a
	// repeated address.
	g.Expect(s.Ensure(ctx, []Record{
		{Name: "api.other", IP: netip.MustParseAddr("192.0.2.30"), TTL: 30},
		{Name: "api.other", IP: netip.MustParseAddr("192.0.2.31"), TTL: 30},
		{Name: "api.other", IP: netip.MustParseAddr("192.0.2.31"), TTL: 30},
	})).To(Succeed())
	b.expectAddrs(t, "api.other.example.com.", "192.0.2.30", "192.0.2.31")
	b.expectAddrs(t, "api.demo.example.com.", "192.0.2.20")
}

// TestEnsureIPv6: IPv6 addresses are AAAA records; a name given both
// families answers both; a name given one family loses the other's.
func TestEnsureIPv6(t *testing.T) {
	g := NewWithT(t)
	b := startBind(t)
	s := b.server()
	ctx := context.Background()
	api, ingress := netip.MustParseAddr("2001:db8::10"), netip.MustParseAddr("2001:db8::11")

	g.Expect(s.Ensure(ctx, ClusterRecords("six", "example.com", api, ingress, 60))).To(Succeed())
	b.expectAddrs(t, "api.six.example.com.", "2001:db8::10")
	b.expectAddrs(t, "some-route.apps.six.example.com.", "2001:db8::11")

	g.Expect(s.Ensure(ctx, []Record{
		{Name: "api.six.example.com.", IP: netip.MustParseAddr("2001:db8::20"), TTL: 60},
		{Name: "api.six.example.com.", IP: netip.MustParseAddr("192.0.2.20"), TTL: 60},
	})).To(Succeed())
	b.expectAddrs(t, "api.six.example.com.", "192.0.2.20", "2001:db8::20")

	// An IPv4-mapped address is an A record.
	g.Expect(s.Ensure(ctx, []Record{{Name: "api.six.example.com.", IP: netip.MustParseAddr("::ffff:192.0.2.21"), TTL: 60}})).To(Succeed())
	b.expectAddrs(t, "api.six.example.com.", "192.0.2.21")
	c := &dns.Client{Net: "tcp"}
	q := new(dns.Msg)
	q.SetQuestion("api.six.example.com.", dns.TypeAAAA)
	r, _, err := c.Exchange(q, b.addr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rcode).To(Equal(dns.RcodeSuccess))
	g.Expect(r.Answer).To(BeEmpty(), "the AAAA RRset is deleted")
}

// TestRemove: Remove deletes the names' records; a second Remove, and one
// of names never written, succeed.
func TestRemove(t *testing.T) {
	g := NewWithT(t)
	b := startBind(t)
	s := b.server()
	ctx := context.Background()
	records := ClusterRecords("gone", "example.com", netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::11"), 60)
	g.Expect(s.Ensure(ctx, records)).To(Succeed())
	g.Expect(s.Ensure(ctx, []Record{{Name: "api.kept", IP: netip.MustParseAddr("192.0.2.40"), TTL: 60}})).To(Succeed())
	b.expectAddrs(t, "api.gone.example.com.", "192.0.2.10")

	names := []string{records[0].Name, records[1].Name, records[2].Name}
	g.Expect(s.Remove(ctx, names)).To(Succeed())
	b.expectNotFound(t, "api.gone.example.com.")
	b.expectNotFound(t, "api-int.gone.example.com.")
	b.expectNotFound(t, "some-route.apps.gone.example.com.")
	b.expectAddrs(t, "api.kept.example.com.", "192.0.2.40")

	g.Expect(s.Remove(ctx, names)).To(Succeed())
	g.Expect(s.Remove(ctx, []string{"never.written", "api.never.example.com."})).To(Succeed())
	g.Expect(s.Remove(ctx, nil)).To(Succeed())
	b.expectAddrs(t, "api.kept.example.com.", "192.0.2.40")
}

// TestKeyRejected: an update signed with a wrong secret, or with a key the
// server does not know, is refused with an error naming the server, the
// zone, the rcode and the TSIG error, and no secret; nothing is written.
func TestKeyRejected(t *testing.T) {
	b := startBind(t)
	ctx := context.Background()
	records := ClusterRecords("demo", "example.com", netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11"), 60)

	for _, tc := range []struct {
		name, keyName, tsigError string
		code                     uint16
	}{
		{"wrong secret", testKeyName, "BADSIG", dns.RcodeBadSig},
		{"unknown key", "someone-else.", "BADKEY", dns.RcodeBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := b.server()
			wrong := otherSecret()
			s.Key = &Key{Name: tc.keyName, Algorithm: "hmac-sha256.", Secret: wrong}

			err := s.Ensure(ctx, records)
			g.Expect(err).To(HaveOccurred())
			var e *Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
			g.Expect(e.Rcode).To(Equal(dns.RcodeNotAuth), "%v", err)
			g.Expect(e.TSIGError).To(Equal(tc.code), "%v", err)
			g.Expect(e.IsTSIGRejected()).To(BeTrue())
			g.Expect(err.Error()).To(HavePrefix("DNS server " + b.addr + " refused the update of zone example.com.: NOTAUTH (TSIG key rejected: " + tc.tsigError))
			expectNoSecret(t, err, wrong, b.key.Secret)

			err = s.Remove(ctx, []string{"api.demo"})
			g.Expect(err).To(MatchError(ContainSubstring("NOTAUTH (TSIG key rejected: " + tc.tsigError)))
			expectNoSecret(t, err, wrong, b.key.Secret)

			b.expectNotFound(t, "api.demo.example.com.")
		})
	}
}

// TestRefused: a zone the server does not serve, and an unsigned update
// of one that needs the key, are refused with errors naming the zone and
// the rcode.
func TestRefused(t *testing.T) {
	g := NewWithT(t)
	b := startBind(t)
	ctx := context.Background()
	records := []Record{{Name: "api.demo", IP: netip.MustParseAddr("192.0.2.10"), TTL: 60}}

	s := b.server()
	s.Zone = "unknown.test"
	err := s.Ensure(ctx, records)
	var e *Error
	g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
	g.Expect(e.Rcode).To(Equal(dns.RcodeNotAuth), "%v", err)
	g.Expect(e.IsTSIGRejected()).To(BeFalse(), "%v", err)
	g.Expect(err).To(MatchError("DNS server " + b.addr + " refused the update of zone unknown.test.: NOTAUTH (the server is not authoritative for the zone)"))
	expectNoSecret(t, err, b.key.Secret)

	s = b.server()
	s.Key = nil
	err = s.Ensure(ctx, records)
	g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
	g.Expect(e.Rcode).To(Equal(dns.RcodeRefused), "%v", err)
	g.Expect(err).To(MatchError(HavePrefix("DNS server " + b.addr + " refused the update of zone example.com.: REFUSED (")))
	b.expectNotFound(t, "api.demo.example.com.")
}

// TestNoAnswer: a server that takes the connection and never answers is a
// timeout that says so; a cancelled context ends the update too.
func TestNoAnswer(t *testing.T) {
	g := NewWithT(t)
	// A listener handed in, not a port: it accepts and reads, and answers
	// nothing.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	secret := otherSecret()
	s := Server{Address: l.Addr().String(), Zone: "example.com", Key: &Key{Name: "k", Secret: secret}, Timeout: 200 * time.Millisecond}
	records := []Record{{Name: "api.demo", IP: netip.MustParseAddr("192.0.2.10"), TTL: 60}}

	err = s.Ensure(context.Background(), records)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(err).To(MatchError("DNS server " + l.Addr().String() + " did not answer the update of zone example.com.: timed out after 200ms"))
	expectNoSecret(t, err, secret)

	// The caller's deadline, before the time limit, is the caller's.
	s.Timeout = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = s.Ensure(ctx, records)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(err).To(MatchError("DNS server " + l.Addr().String() + ": the update of zone example.com. failed: context deadline exceeded"))

	// Cancelled while it waits for the answer.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Remove(ctx, []string{"api.demo"}) }()
	cancel()
	g.Expect(<-done).To(MatchError(context.Canceled))
}

// TestInvalid: what cannot be sent is refused before anything is sent,
// naming what is wrong and never the secret.
func TestInvalid(t *testing.T) {
	// Nothing listens here: an update that got as far as sending would
	// fail differently.
	const nowhere = "127.0.0.1:9"
	ip := netip.MustParseAddr("192.0.2.10")
	ctx := context.Background()
	secret := otherSecret()
	for _, tc := range []struct {
		name    string
		server  Server
		records []Record
		want    string
	}{
		{"no zone", Server{Address: nowhere}, []Record{{Name: "a", IP: ip}}, "DNS update: no zone"},
		{"no address", Server{Zone: "example.com"}, []Record{{Name: "a", IP: ip}}, "DNS update: no server address"},
		{"outside the zone", Server{Address: nowhere, Zone: "example.com"}, []Record{{Name: "api.example.org.", IP: ip}}, "DNS update: api.example.org. is not in zone example.com."},
		{"no address in a record", Server{Address: nowhere, Zone: "example.com"}, []Record{{Name: "api"}}, "DNS update: record api.example.com. has no address"},
		{"IPv6 zone", Server{Address: nowhere, Zone: "example.com"}, []Record{{Name: "api", IP: netip.MustParseAddr("fe80::1%eth0")}}, "DNS update: record api.example.com.: address fe80::1%eth0 has an IPv6 zone, which DNS cannot hold"},
		{"key without name", Server{Address: nowhere, Zone: "example.com", Key: &Key{Secret: secret}}, []Record{{Name: "api", IP: ip}}, "DNS update: the TSIG key has no name"},
		{"unknown algorithm", Server{Address: nowhere, Zone: "example.com", Key: &Key{Name: "k", Algorithm: "hmac-md5", Secret: secret}}, []Record{{Name: "api", IP: ip}}, `DNS update: TSIG key k.: algorithm "hmac-md5" is not one of hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512`},
		{"secret not base64", Server{Address: nowhere, Zone: "example.com", Key: &Key{Name: "k", Secret: "not base64!" + secret}}, []Record{{Name: "api", IP: ip}}, "DNS update: TSIG key k.: the secret is not base64 (as in a BIND key file) or is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.server.Ensure(ctx, tc.records)
			g.Expect(err).To(MatchError(tc.want))
			expectNoSecret(t, err, secret)
		})
	}
	// Nothing to do is done without a server.
	g := NewWithT(t)
	g.Expect(Server{Address: nowhere, Zone: "example.com"}.Ensure(ctx, nil)).To(Succeed())
	g.Expect(Server{Address: nowhere, Zone: "example.com"}.Remove(ctx, nil)).To(Succeed())
}

// TestClusterRecords: the three names of a cluster, fully qualified,
// whether the base domain ends with a dot or not.
func TestClusterRecords(t *testing.T) {
	g := NewWithT(t)
	api, ingress := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::11")
	want := []Record{
		{Name: "api.demo.example.com.", IP: api, TTL: 30},
		{Name: "api-int.demo.example.com.", IP: api, TTL: 30},
		{Name: "*.apps.demo.example.com.", IP: ingress, TTL: 30},
	}
	g.Expect(ClusterRecords("demo", "example.com", api, ingress, 30)).To(Equal(want))
	g.Expect(ClusterRecords("demo", "example.com.", api, ingress, 30)).To(Equal(want))
}

// TestAddress: a server without a port is on port 53.
func TestAddress(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"ns1.example.com":    "ns1.example.com:53",
		"ns1.example.com:54": "ns1.example.com:54",
		"192.0.2.1":          "192.0.2.1:53",
		"2001:db8::1":        "[2001:db8::1]:53",
		"[2001:db8::1]":      "[2001:db8::1]:53",
		"[2001:db8::1]:54":   "[2001:db8::1]:54",
	} {
		got, err := Server{Address: in}.address()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), in)
	}
}

// TestUntrustedSuccess: a success that is not signed with the key, or
// whose signature does not verify, is not taken for one: anyone between
// this host and the server could have sent it. BIND signs every answer to
// a signed update, so the answering server here is a small one of the
// test's own, on a listener handed in.
func TestUntrustedSuccess(t *testing.T) {
	key := Key{Name: "k.", Algorithm: dns.HmacSHA256, Secret: otherSecret()}
	forged := otherSecret()
	for _, tc := range []struct {
		name string
		sign bool
		want string
	}{
		{"unsigned", false, "the answer is not signed with the TSIG key: its success cannot be trusted"},
		{"signed with another secret", true, "the answer cannot be trusted: dns: bad signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			srv := &dns.Server{
				Listener:   l,
				TsigSecret: map[string]string{key.Name: forged},
				// It answers success whatever it is sent, and signs the
				// answer with the forged secret when asked to.
				MsgAcceptFunc: func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept },
				Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
					r := new(dns.Msg)
					r.SetReply(m)
					if tc.sign {
						r.SetTsig(key.Name, dns.HmacSHA256, 300, time.Now().Unix())
					}
					_ = w.WriteMsg(r)
				}),
			}
			started := make(chan struct{})
			srv.NotifyStartedFunc = func() { close(started) }
			go func() { _ = srv.ActivateAndServe() }()
			<-started
			t.Cleanup(func() { _ = srv.Shutdown() })

			s := Server{Address: l.Addr().String(), Zone: "example.com", Key: &key}
			err = s.Ensure(context.Background(), []Record{{Name: "api", IP: netip.MustParseAddr("192.0.2.10"), TTL: 60}})
			g.Expect(err).To(MatchError("DNS server " + l.Addr().String() + ": the update of zone example.com. failed: " + tc.want))
			expectNoSecret(t, err, key.Secret, forged)
		})
	}
}
