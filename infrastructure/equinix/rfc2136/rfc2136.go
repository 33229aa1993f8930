package rfc2136

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DefaultTimeout bounds an update when Server.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// DefaultAlgorithm is the TSIG algorithm of a Key that names none, as the
// cluster's TSIG Secret without an algorithm means.
const DefaultAlgorithm = dns.HmacSHA256

// fudge is how far apart, in seconds, the clocks of this process and the
// server may be: RFC 8945's recommended 300.
const fudge = 300

// Key is a TSIG key: its name as the server knows it, its algorithm
// ("hmac-sha256." and the other HMAC-SHA ones, with or without the final
// dot; DefaultAlgorithm when empty) and its secret, base64 encoded as in a
// BIND key file. The secret only signs: it goes into no error.
type Key struct{ Name, Algorithm, Secret string }

// Server names where updates go.
type Server struct {
	// Address is the server, host:port, or a host alone for port 53.
	Address string
	// Zone is the zone the records live in, e.g. "example.com." (the final
	// dot may be left out).
	Zone string
	// Key signs the updates. Nil sends them unsigned, which only a server
	// that allows updates by the client's address takes.
	Key *Key
	// Timeout bounds each update, dial included; DefaultTimeout when zero.
	Timeout time.Duration
}

// Record is one A or AAAA record: an IPv4 address (an IPv4-mapped IPv6
// one counts as IPv4) makes an A record, an IPv6 address an AAAA record.
// Name is fully qualified (with the final dot) or relative to the
// server's zone; "@" is the zone itself.
type Record struct {
	Name string
	IP   netip.Addr
	TTL  uint32
}

// ClusterRecords returns the records of a cluster: api.<cluster>.<baseDomain>
// and api-int.<cluster>.<baseDomain> at the API's address, and
// *.apps.<cluster>.<baseDomain> (the routes of the ingress) at the ingress's,
// each fully qualified.
func ClusterRecords(cluster, baseDomain string, apiIP, ingressIP netip.Addr, ttl uint32) []Record {
	domain := cluster + "." + strings.TrimSuffix(baseDomain, ".") + "."
	return []Record{
		{Name: "api." + domain, IP: apiIP, TTL: ttl},
		{Name: "api-int." + domain, IP: apiIP, TTL: ttl},
		{Name: "*.apps." + domain, IP: ingressIP, TTL: ttl},
	}
}

// Ensure makes the address records of each name in records exactly the
// addresses given for it: in one update message, which the server applies
// whole or not at all, it deletes the name's A and AAAA RRsets and adds the
// records. Running it again with the same records changes nothing.
func (s Server) Ensure(ctx context.Context, records []Record) error {
	zone, err := s.zone()
	if err != nil {
		return err
	}
	var names []string
	byName := map[string][]dns.RR{}
	seen := map[string]bool{}
	for _, r := range records {
		name, err := recordName(zone, r.Name)
		if err != nil {
			return err
		}
		if _, ok := byName[name]; !ok {
			names = append(names, name)
			byName[name] = nil
		}
		rr, err := addressRR(name, r)
		if err != nil {
			return err
		}
		// The same address twice is one record: the server would keep
		// one, and a message without the repeat is smaller.
		if key := rr.String(); !seen[key] {
			seen[key] = true
			byName[name] = append(byName[name], rr)
		}
	}
	if len(names) == 0 {
		return nil
	}
	m := new(dns.Msg)
	m.SetUpdate(zone)
	for _, name := range names {
		m.RemoveRRset(addressRRsets(name))
		m.Insert(byName[name])
	}
	return s.send(ctx, zone, m)
}

// Remove deletes the A and AAAA RRsets of names (fully qualified or
// relative to the zone), in one update message. A name without them is
// fine: deleting what is not there succeeds.
func (s Server) Remove(ctx context.Context, names []string) error {
	zone, err := s.zone()
	if err != nil {
		return err
	}
	m := new(dns.Msg)
	m.SetUpdate(zone)
	done := map[string]bool{}
	for _, n := range names {
		name, err := recordName(zone, n)
		if err != nil {
			return err
		}
		if !done[name] {
			done[name] = true
			m.RemoveRRset(addressRRsets(name))
		}
	}
	if len(done) == 0 {
		return nil
	}
	return s.send(ctx, zone, m)
}

// zone is the server's zone, fully qualified and in lower case.
func (s Server) zone() (string, error) {
	if s.Zone == "" {
		return "", errors.New("DNS update: no zone")
	}
	zone := dns.CanonicalName(s.Zone)
	if _, ok := dns.IsDomainName(zone); !ok {
		return "", fmt.Errorf("DNS update: zone %q is not a domain name", s.Zone)
	}
	return zone, nil
}

// address is the server's host:port, port 53 when Address has none.
func (s Server) address() (string, error) {
	if s.Address == "" {
		return "", errors.New("DNS update: no server address")
	}
	if _, _, err := net.SplitHostPort(s.Address); err == nil {
		return s.Address, nil
	}
	return net.JoinHostPort(strings.Trim(s.Address, "[]"), "53"), nil
}

// recordName is name fully qualified in zone, in lower case.
func recordName(zone, name string) (string, error) {
	var fqdn string
	switch {
	case name == "" || name == "@":
		fqdn = zone
	case dns.IsFqdn(name):
		fqdn = dns.CanonicalName(name)
	default:
		fqdn = dns.CanonicalName(name + "." + zone)
	}
	if _, ok := dns.IsDomainName(fqdn); !ok {
		return "", fmt.Errorf("DNS update: %q is not a domain name", name)
	}
	if !dns.IsSubDomain(zone, fqdn) {
		return "", fmt.Errorf("DNS update: %s is not in zone %s", fqdn, zone)
	}
	return fqdn, nil
}

// addressRR is r's A or AAAA record, named name.
func addressRR(name string, r Record) (dns.RR, error) {
	if !r.IP.IsValid() {
		return nil, fmt.Errorf("DNS update: record %s has no address", name)
	}
	if r.IP.Zone() != "" {
		return nil, fmt.Errorf("DNS update: record %s: address %s has an IPv6 zone, which DNS cannot hold", name, r.IP)
	}
	ip := r.IP.Unmap()
	hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: r.TTL}
	if ip.Is4() {
		hdr.Rrtype = dns.TypeA
		return &dns.A{Hdr: hdr, A: ip.AsSlice()}, nil
	}
	hdr.Rrtype = dns.TypeAAAA
	return &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()}, nil
}

// addressRRsets stands for name's A and AAAA RRsets, to delete them.
func addressRRsets(name string) []dns.RR {
	return []dns.RR{
		&dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA}},
		&dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA}},
	}
}

// key checks k and returns its name and algorithm, fully qualified and in
// lower case as the TSIG record carries them.
func (k *Key) key() (name, algorithm string, err error) {
	if k.Name == "" {
		return "", "", errors.New("DNS update: the TSIG key has no name")
	}
	name = dns.CanonicalName(k.Name)
	if _, ok := dns.IsDomainName(name); !ok {
		return "", "", fmt.Errorf("DNS update: TSIG key name %q is not a domain name", k.Name)
	}
	algorithm = DefaultAlgorithm
	if k.Algorithm != "" {
		algorithm = dns.CanonicalName(k.Algorithm)
	}
	switch algorithm {
	case dns.HmacSHA1, dns.HmacSHA224, dns.HmacSHA256, dns.HmacSHA384, dns.HmacSHA512:
	default:
		return "", "", fmt.Errorf("DNS update: TSIG key %s: algorithm %q is not one of hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512", name, k.Algorithm)
	}
	// The decoder's own error is not wrapped: it quotes no secret today,
	// and nothing here should depend on that.
	if secret, err := base64.StdEncoding.DecodeString(k.Secret); err != nil || len(secret) == 0 {
		return "", "", fmt.Errorf("DNS update: TSIG key %s: the secret is not base64 (as in a BIND key file) or is empty", name)
	}
	return name, algorithm, nil
}

// send sends the update m of zone and reads the server's answer.
func (s Server) send(ctx context.Context, zone string, m *dns.Msg) error {
	addr, err := s.address()
	if err != nil {
		return err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// TCP: an answer is never truncated, and a server that does not answer
	// shows as a read that times out on this one connection.
	c := &dns.Client{Net: "tcp", Timeout: timeout}
	if s.Key != nil {
		name, algorithm, err := s.Key.key()
		if err != nil {
			return err
		}
		c.TsigSecret = map[string]string{name: s.Key.Secret}
		m.SetTsig(name, algorithm, fudge, time.Now().Unix())
	}
	fail := func(err error) error {
		return &Error{Server: addr, Zone: zone, Err: err}
	}
	// noAnswer is the error of an exchange that failed: the time limit's,
	// or the caller's when their context ended it. The connection's
	// deadline is the earlier of the two and may pass a moment before a
	// context says so, so the deadlines themselves tell which it was.
	parent := ctx
	limit := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	callerFirst := false
	if d, ok := parent.Deadline(); ok && d.Before(limit) {
		callerFirst = true
	}
	noAnswer := func(err error) error {
		switch {
		case parent.Err() != nil:
			return fail(parent.Err())
		case ctx.Err() == nil && !errors.Is(err, os.ErrDeadlineExceeded):
			return fail(err)
		case callerFirst:
			return fail(context.DeadlineExceeded)
		}
		return &Error{Server: addr, Zone: zone, Err: context.DeadlineExceeded, Timeout: timeout}
	}

	conn, err := c.DialContext(ctx, addr)
	if err != nil {
		return noAnswer(err)
	}
	defer func() { _ = conn.Close() }()
	// The exchange heeds the context's deadline, not its cancellation:
	// closing the connection ends it on either.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	r, _, err := c.ExchangeWithConnContext(ctx, m, conn)
	switch {
	case r == nil && err == nil:
		return fail(errors.New("no answer"))
	case r == nil:
		return noAnswer(err)
	case r.Rcode != dns.RcodeSuccess:
		// Whether its TSIG verified or not, a refusal is a refusal; a
		// server that rejects the key cannot sign with it.
		e := &Error{Server: addr, Zone: zone, Rcode: r.Rcode}
		if t := r.IsTsig(); t != nil {
			e.TSIGError = t.Error
		}
		return e
	case err != nil:
		return fail(fmt.Errorf("the answer cannot be trusted: %w", err))
	case s.Key != nil && r.IsTsig() == nil:
		// A success that is not signed with the key may come from anyone.
		return fail(errors.New("the answer is not signed with the TSIG key: its success cannot be trusted"))
	}
	return nil
}

// Error is an update the server refused or did not answer.
type Error struct {
	// Server is the server's host:port, Zone the zone updated.
	Server, Zone string
	// Rcode is the server's answer (dns.RcodeRefused, dns.RcodeNotAuth,
	// ...), 0 when it gave none Err explains.
	Rcode int
	// TSIGError is the error of the answer's TSIG record (dns.RcodeBadSig,
	// dns.RcodeBadKey, dns.RcodeBadTime), 0 when there is none.
	TSIGError uint16
	// Err is why there is no answer to go by: context.DeadlineExceeded
	// when the server did not answer within Timeout, the caller's
	// context's error when it ended first, a network error, an answer that
	// cannot be trusted.
	Err error
	// Timeout is the time limit the server did not answer within, 0 when
	// it did not run out.
	Timeout time.Duration
}

func (e *Error) Error() string {
	if e.Rcode != dns.RcodeSuccess {
		return fmt.Sprintf("DNS server %s refused the update of zone %s: %s (%s)", e.Server, e.Zone, rcodeName(e.Rcode), e.explain())
	}
	if e.Timeout > 0 {
		return fmt.Sprintf("DNS server %s did not answer the update of zone %s: timed out after %s", e.Server, e.Zone, e.Timeout)
	}
	return fmt.Sprintf("DNS server %s: the update of zone %s failed: %v", e.Server, e.Zone, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsTSIGRejected reports whether the server rejected the update's TSIG
// key: unknown to it, a wrong secret or algorithm, or clocks too far apart.
func (e *Error) IsTSIGRejected() bool { return e.TSIGError != 0 }

// explain says what an rcode means for an update.
func (e *Error) explain() string {
	switch e.TSIGError {
	case 0:
	case dns.RcodeBadSig:
		return "TSIG key rejected: BADSIG, the secret or algorithm differs from the server's"
	case dns.RcodeBadKey:
		return "TSIG key rejected: BADKEY, the server does not know the key's name or algorithm"
	case dns.RcodeBadTime:
		return "TSIG key rejected: BADTIME, the clocks of the server and this host differ by more than 5 minutes"
	default:
		return fmt.Sprintf("TSIG key rejected: TSIG error %d", e.TSIGError)
	}
	switch e.Rcode {
	case dns.RcodeNotAuth:
		return "the server is not authoritative for the zone"
	case dns.RcodeRefused:
		return "the server does not allow this update: its allow-update or update-policy must grant the key the zone, or it does not serve the zone"
	case dns.RcodeNotZone:
		return "a name is outside the zone"
	case dns.RcodeNotImplemented:
		return "the server does not take dynamic updates"
	case dns.RcodeFormatError:
		return "the server could not read the update"
	case dns.RcodeServerFailure:
		return "the server failed to apply it; its log says why"
	}
	return "an unexpected answer to an update"
}

// rcodeName is the rcode's mnemonic, or its number.
func rcodeName(rcode int) string {
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return fmt.Sprintf("RCODE%d", rcode)
}
