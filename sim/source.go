package sim

import (
	"net"
	"net/http"
	"time"

	"github.com/metalshift/metalshift/sim/machine"
)

// fromMachine is c with its connections made from m's own address, as a
// real machine's (and its BMC's) come from theirs: the hub's servers
// budget requests per source address, and a lab of many machines behind
// one address would be one client to them. Only a loopback address can
// be bound here (a lab on 127.x.y.z, as the fleet benchmarks'); for
// others, and a transport that dials TLS itself, c is returned.
func (f *Firmware) fromMachine(m *machine.Machine, c *http.Client) *http.Client {
	if m == nil || len(m.Hardware.NICs) == 0 {
		return c
	}
	ip := net.ParseIP(m.Hardware.NICs[0].IP)
	base, ok := c.Transport.(*http.Transport)
	if ip == nil || !ip.IsLoopback() || !ok || base.DialTLSContext != nil {
		return c
	}
	bind := func() *http.Client {
		t := base.Clone()
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}).DialContext
		bound := *c
		bound.Transport = t
		return &bound
	}
	// The firmware's own client is bound once per machine (its idle
	// connections kept); an agent's, made at each boot, each time.
	if c != f.HTTP {
		return bind()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got, ok := f.sources[m.ID]; ok {
		return got
	}
	if f.sources == nil {
		f.sources = map[string]*http.Client{}
	}
	f.sources[m.ID] = bind()
	return f.sources[m.ID]
}
